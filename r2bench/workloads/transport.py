"""Striped multi-NIC TCP ring transport with stall detection and failover.

This is an *emulator* of R2CCL's network transport for GPU-less testing: it is not NCCL.
Each ring hop (rank r -> rank r+1) opens, per data NIC i, a PRIMARY TCP connection from
NIC i of rank r to NIC i of rank r+1, plus a pre-opened BACKUP connection per channel over
another NIC (channel i's backup uses NIC (i+1) % k), like R2CCL's PRIMARY/BACKUP pair.

Protocol: every ring step carries a global step id ``g``. The sender splits the step's
chunk into *shares* (one per channel) and sends ``header + payload`` on each share's
connection; the receiver places the payload at its offset in the destination buffer and
acknowledges ``(g, share)`` on the same connection; while a receiver is not yet at step
``g`` it sends heartbeat frames instead, so a slow peer is not mistaken for a dead link. A
share not acknowledged, with no send progress and no frame back on its connection for
``R2CC_FAILOVER_TIMEOUT_MS``, is a stall:

* mode 0 (fail-stop) raises :class:`NetworkFailure`;
* modes 1 and 2 resend every unacknowledged share of that connection on a backup
  connection over a healthy NIC (attempt number + 1). The receiver accepts each share once
  (a newer attempt shuts the older connection down first), so nothing is lost or doubled.
  Mode 1 keeps the failed channel on the backup; mode 2 stripes later steps over the healthy
  NICs by measured bandwidth.

Log lines (stderr, when ``NCCL_DEBUG=INFO``; WARN lines also with ``NCCL_DEBUG=WARN``)::

    [<epoch s>.<us 6 digits>] <host>:<pid>:<tid> [<rank>] NCCL INFO <message>
    [<epoch s>.<us 6 digits>] <host>:<pid>:<tid> [<rank>] NCCL WARN <message>

regex: ``^\\[(\\d+\\.\\d{6})\\] ([^:]+):(\\d+):(\\d+) \\[(\\d+)\\] NCCL (INFO|WARN) (.*)$``.
Failover messages (R2CCL's wording):

* ``R2CC_MODE=1 (SEND): Channel <c> will simulate disable of device <d> (<name>) and use
  backup device <b> (<name>)`` and the same with ``(RECV)`` on the receiving rank;
* ``OOB: Broadcast HOT_REPAIR signal from rank <r> to <n> peers``;
  ``OOB: Received HOT_REPAIR signal 'HOT_REPAIR <r>' from <ip>:<port>``;
* ``R2CC: hot-repair detected, forcing R2CC_MODE=2`` (mode 2, when rebalancing starts);
* ``NCCL WARN NET/Socket : send to rank <p> on channel <c> device <d> (<name>) stalled
  for <ms> ms`` on every detected stall.

Test hook (for unit tests only): ``R2B_TEST_FREEZE=<rank>:<nic>:<coll>`` makes rank
``<rank>`` stop sending on every connection bound to its NIC ``<nic>`` from collective
number ``<coll>`` on (0-based, counting warm-up calls), keeping the sockets open: a silent
stall like a link taken down.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HEADER = struct.Struct("!IQQIIQQ")  # magic, coll, g, share, attempt, offset, nbytes
ACK = struct.Struct("!IQI")  # magic, g, share
HELLO = struct.Struct("!IIIII")  # magic, rank, kind, channel, nic
MAGIC = 0x52324243  # "R2BC"
PRIMARY, BACKUP = 0, 1
KIND_NAMES = ("PRIMARY", "BACKUP")
POLL_S = 0.02
SCRATCH_BYTES = 1 << 20
HEARTBEAT = (1 << 64) - 1  # ack frame meaning "receiver alive, step not posted yet"


@dataclass(frozen=True)
class R2ccLog:
    """Writes NCCL-style INFO/WARN lines with an epoch timestamp to stderr."""

    host: str
    rank: int
    level: int  # 0 = silent, 1 = WARN, 2 = INFO (from NCCL_DEBUG)

    @staticmethod
    def from_env(rank: int, env: dict[str, str]) -> R2ccLog:
        """Build from ``NCCL_DEBUG`` (``INFO``/``TRACE``: all lines, ``WARN``: warnings)."""
        debug = env.get("NCCL_DEBUG", "").upper()
        level = 2 if debug in ("INFO", "TRACE") else 1 if debug == "WARN" else 0
        return R2ccLog(socket.gethostname(), rank, level)

    def _emit(self, kind: str, message: str) -> None:
        prefix = f"{self.host}:{os.getpid()}:{threading.get_native_id()} [{self.rank}]"
        sys.stderr.write(f"[{time.time():.6f}] {prefix} NCCL {kind} {message}\n")
        sys.stderr.flush()

    def info(self, message: str) -> None:
        """Log an INFO line (NCCL_DEBUG=INFO)."""
        if self.level >= 2:
            self._emit("INFO", message)

    def warn(self, message: str) -> None:
        """Log a WARN line (NCCL_DEBUG=WARN or INFO)."""
        if self.level >= 1:
            self._emit("WARN", message)


class NetworkFailure(RuntimeError):
    """A connection broke or stalled and no failover is possible (or allowed)."""


class CollectiveTimeout(RuntimeError):
    """One collective ran longer than the ``-T`` timeout."""


@dataclass(frozen=True)
class FreezeHook:
    """Test hook: from collective ``coll`` on, rank ``rank`` stops sending on NIC ``nic``."""

    rank: int
    nic: int
    coll: int

    @staticmethod
    def parse(text: str | None) -> FreezeHook | None:
        """Parse ``<rank>:<nic>:<coll>`` (``None`` or empty: no hook)."""
        if not text:
            return None
        rank, nic, coll = (int(x) for x in text.split(":"))
        return FreezeHook(rank, nic, coll)


@dataclass(frozen=True)
class Nic:
    """One local data NIC: index, IPv4 address and display name."""

    index: int
    addr: str
    name: str


@dataclass
class TransportConfig:
    """Everything the ring transport needs to know about this rank."""

    rank: int
    size: int
    nics: list[Nic]
    mode: int
    failover_timeout_s: float
    log: R2ccLog
    freeze: FreezeHook | None = None


@dataclass
class Share:
    """A contiguous byte range of one ring step, sent on one connection."""

    coll: int
    g: int
    sid: int
    attempt: int
    offset: int
    view: memoryview
    issued: float = 0.0
    conn: SendConn | None = None


@dataclass
class Slot:
    """Receive state of one step: destination buffer, shares received and claimed."""

    view: memoryview
    nbytes: int
    got: int = 0
    received: set[int] = field(default_factory=set)
    claims: dict[int, tuple[RecvConn, int]] = field(default_factory=dict)


def _sock_recv_exact(sock: socket.socket, view: memoryview) -> bool:
    """Fill ``view`` from ``sock``; False on EOF or socket error."""
    pos = 0
    while pos < len(view):
        try:
            got = sock.recv_into(view[pos:])
        except OSError:
            return False
        if got == 0:
            return False
        pos += got
    return True


def _shutdown(sock: socket.socket) -> None:
    """Shut a socket down both ways, ignoring errors (wakes blocked readers)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class RecvWindow:
    """Destination slots for incoming steps; arbitrates duplicate shares."""

    def __init__(self, cond: threading.Condition) -> None:
        self.cond = cond
        self.slots: dict[int, Slot] = {}
        self.latest = -1
        self.closing = False

    def post(self, g: int, view: memoryview) -> None:
        """Expect step ``g`` into ``view``."""
        with self.cond:
            self.slots[g] = Slot(view, len(view))
            self.latest = g
            self.cond.notify_all()

    def complete(self, g: int) -> bool:
        """True when step ``g`` is fully received (or was never posted). Hold ``cond``."""
        slot = self.slots.get(g)
        return slot is None or slot.got >= slot.nbytes

    def retire(self, g: int) -> None:
        """Forget step ``g`` once the caller has consumed it."""
        with self.cond:
            self.slots.pop(g, None)

    def wait_posted(self, g: int, timeout: float) -> bool:
        """Wait up to ``timeout`` for step ``g`` to be posted (True also if already past)."""
        with self.cond:
            if g not in self.slots and g > self.latest and not self.closing:
                self.cond.wait(timeout)
            return g in self.slots or g <= self.latest or self.closing

    def claim(self, conn: RecvConn, g: int, sid: int, attempt: int) -> memoryview | None:
        """Reserve share ``sid`` of step ``g`` for ``conn``; None means discard the payload."""
        with self.cond:
            slot = self.slots.get(g)
            if slot is None or sid in slot.received:
                return None
            while sid in slot.claims and not self.closing:
                holder, held_attempt = slot.claims[sid]
                if held_attempt >= attempt:
                    return None
                _shutdown(holder.sock)
                self.cond.wait(POLL_S)
            if sid in slot.received or self.closing:
                return None
            slot.claims[sid] = (conn, attempt)
            return slot.view

    def finish(self, g: int, sid: int, nbytes: int, ok: bool) -> None:
        """Record the end of a claimed share (``ok``: fully received)."""
        with self.cond:
            slot = self.slots.get(g)
            if slot is None:
                return
            slot.claims.pop(sid, None)
            if ok and sid not in slot.received:
                slot.received.add(sid)
                slot.got += nbytes
            self.cond.notify_all()


class SendConn:
    """Sending end of one TCP connection: a writer thread and an ack-reader thread."""

    def __init__(self, ring: RingTransport, sock: socket.socket, channel: int, nic: Nic, kind: int):
        self.ring, self.sock, self.channel, self.nic, self.kind = ring, sock, channel, nic, kind
        self.queue: queue.SimpleQueue[Share | None] = queue.SimpleQueue()
        self.last_progress = time.monotonic()
        self.dead = False
        self.broken = False
        self.bw = 0.0  # measured bytes/s (EWMA over acknowledged shares)
        sock.settimeout(POLL_S)
        for target in (self._send_loop, self._ack_loop):
            threading.Thread(target=target, daemon=True).start()

    def label(self) -> str:
        """Short description for log lines."""
        return f"channel {self.channel} device {self.nic.index} ({self.nic.name})"

    def _frozen(self, share: Share) -> bool:
        hook = self.ring.cfg.freeze
        return bool(
            hook
            and hook.rank == self.ring.cfg.rank
            and hook.nic == self.nic.index
            and share.coll >= hook.coll
        )

    def _send_all(self, data: memoryview) -> bool:
        pos = 0
        while pos < len(data):
            if self.dead:
                return False
            try:
                pos += self.sock.send(data[pos:])
                self.last_progress = time.monotonic()
            except TimeoutError:
                continue
            except OSError:
                self.broken = True
                return False
        return True

    def _send_loop(self) -> None:
        while (share := self.queue.get()) is not None:
            while self._frozen(share) and not self.dead:
                time.sleep(POLL_S)
            head = HEADER.pack(
                MAGIC, share.coll, share.g, share.sid, share.attempt, share.offset, len(share.view)
            )
            if not (self._send_all(memoryview(head)) and self._send_all(share.view)):
                return

    def _ack_loop(self) -> None:
        buf = bytearray(ACK.size)
        view = memoryview(buf)
        pos = 0
        while not self.dead:
            try:
                got = self.sock.recv_into(view[pos:])
            except TimeoutError:
                continue
            except OSError:
                got = 0
            if got == 0:
                self.broken = not self.dead and not self.ring.closing
                return
            pos += got
            if pos == ACK.size:
                pos = 0
                _, g, sid = ACK.unpack(buf)
                self.last_progress = time.monotonic()
                if g != HEARTBEAT:
                    self.ring.on_ack(self, g, sid)

    def retire(self) -> None:
        """Stop using this connection for good."""
        self.dead = True
        self.queue.put(None)
        _shutdown(self.sock)


class RecvConn:
    """Receiving end of one TCP connection: one thread reads shares and writes acks."""

    def __init__(self, ring: RingTransport, sock: socket.socket, channel: int, nic: int, kind: int):
        self.ring, self.sock, self.channel, self.nic, self.kind = ring, sock, channel, nic, kind
        self.broken = False
        threading.Thread(target=self._loop, daemon=True).start()

    def _discard(self, nbytes: int, scratch: memoryview) -> bool:
        while nbytes > 0:
            step = min(nbytes, len(scratch))
            if not _sock_recv_exact(self.sock, scratch[:step]):
                return False
            nbytes -= step
        return True

    def _one_share(self, head: bytes, scratch: memoryview) -> bool:
        magic, _coll, g, sid, attempt, offset, nbytes = HEADER.unpack(head)
        if magic != MAGIC:
            return False
        if attempt > 0 and self.kind == BACKUP:
            self.ring.note_backup_recv(self)
        window = self.ring.window
        while not window.wait_posted(g, self.ring.heartbeat_s):
            if not self._send_ack(HEARTBEAT, 0):  # "alive, not ready yet": not a stall
                return False
        dest = window.claim(self, g, sid, attempt)
        if dest is None:
            ok = self._discard(nbytes, scratch)
        else:
            ok = offset + nbytes <= len(dest) and _sock_recv_exact(
                self.sock, dest[offset : offset + nbytes]
            )
            window.finish(g, sid, nbytes, ok)
        return ok and self._send_ack(g, sid)

    def _send_ack(self, g: int, sid: int) -> bool:
        try:
            self.sock.sendall(ACK.pack(MAGIC, g, sid))
        except OSError:
            return False
        return True

    def _loop(self) -> None:
        head = bytearray(HEADER.size)
        scratch = memoryview(bytearray(SCRATCH_BYTES))
        while _sock_recv_exact(self.sock, memoryview(head)):
            if not self._one_share(bytes(head), scratch):
                break
        self.broken = not self.ring.closing


class OobNet:
    """Out-of-band UDP signalling (one socket per local NIC), like R2CCL's OOB socket."""

    def __init__(self, cfg: TransportConfig) -> None:
        self.cfg = cfg
        self.socks = []
        for nic in cfg.nics:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((nic.addr, 0))
            self.socks.append(sock)
            cfg.log.info(f"OOB: Socket Initialized on Port {sock.getsockname()[1]}")
        self.peers: list[list[tuple[str, int]]] = []
        self.seen: set[int] = set()
        self.sent = False

    def addresses(self) -> list[tuple[str, int]]:
        """Local OOB addresses, one per NIC, to exchange at bootstrap."""
        return [s.getsockname() for s in self.socks]

    def start(self, peers: list[list[tuple[str, int]]]) -> None:
        """Remember every rank's OOB addresses and start listening."""
        self.peers = peers
        threading.Thread(target=self._listen, daemon=True).start()

    def broadcast_hot_repair(self, failed: set[int]) -> None:
        """Tell every peer (over each healthy NIC) that this rank hot-repaired."""
        if self.sent:
            return
        self.sent = True
        msg = f"HOT_REPAIR {self.cfg.rank}".encode() + b"\0"
        for peer, addrs in enumerate(self.peers):
            if peer == self.cfg.rank:
                continue
            for i, sock in enumerate(self.socks):
                if i not in failed and i < len(addrs):
                    with contextlib.suppress(OSError):
                        sock.sendto(msg, addrs[i])
        self.cfg.log.info(
            f"OOB: Broadcast HOT_REPAIR signal from rank {self.cfg.rank} "
            f"to {self.cfg.size - 1} peers"
        )

    def _listen(self) -> None:
        while self.socks:
            try:
                ready, _, _ = select.select(self.socks, [], [], 0.2)
                for sock in ready:
                    data, src = sock.recvfrom(256)
                    self._on_message(data, src)
            except (OSError, ValueError):
                return

    def _on_message(self, data: bytes, src: tuple[str, int]) -> None:
        text = data.rstrip(b"\0").decode(errors="replace")
        parts = text.split()
        if len(parts) == 2 and parts[0] == "HOT_REPAIR" and parts[1].isdigit():
            origin = int(parts[1])
            if origin not in self.seen:
                self.seen.add(origin)
                self.cfg.log.info(
                    f"OOB: Received HOT_REPAIR signal '{text}' from {src[0]}:{src[1]}"
                )

    def close(self) -> None:
        """Close the OOB sockets."""
        socks, self.socks = self.socks, []
        for sock in socks:
            sock.close()


Allgather = Callable[[object], list]


def split_bytes(nbytes: int, weights: list[float], align: int = 4) -> list[tuple[int, int]]:
    """Split ``nbytes`` into ``(offset, length)`` pieces proportional to ``weights``.

    Boundaries fall on multiples of ``align``; empty pieces are kept (length 0) so that
    piece ``i`` always belongs to weight ``i``.
    """
    units = nbytes // align
    total = sum(weights) or 1.0
    bounds, acc = [0], 0.0
    for w in weights[:-1]:
        acc += w
        bounds.append(min(units, round(units * acc / total)))
    bounds.append(units)
    pieces = [(b * align, (e - b) * align) for b, e in itertools.pairwise(bounds)]
    tail = nbytes - units * align
    if tail:
        off, length = pieces[-1]
        pieces[-1] = (off, length + tail)
    return pieces


def _listen(addr: str, backlog: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((addr, 0))
    sock.listen(backlog)
    return sock


def _dial(local: str, remote: tuple[str, int], hello: bytes) -> socket.socket:
    sock = socket.create_connection(remote, timeout=30, source_address=(local, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(hello)
    return sock


class RingTransport:
    """Connections of one rank to its ring neighbours, and the step exchange over them."""

    def __init__(self, cfg: TransportConfig, allgather: Allgather) -> None:
        self.cfg = cfg
        self.cond = threading.Condition()
        self.window = RecvWindow(self.cond)
        self.closing = False
        self.outstanding: dict[tuple[int, int], Share] = {}
        self.failed: set[int] = set()
        self.routes: list[SendConn] = []
        self.backups: dict[int, SendConn] = {}
        self.recv_conns: list[RecvConn] = []
        self.recv_noted: set[int] = set()
        self.weights: list[tuple[SendConn, float]] | None = None
        self.oob = OobNet(cfg)
        self.right = (cfg.rank + 1) % cfg.size
        self.heartbeat_s = min(0.1, cfg.failover_timeout_s / 4)
        self._connect(allgather)

    # ---- setup -------------------------------------------------------------------------
    def _connect(self, allgather: Allgather) -> None:
        k = len(self.cfg.nics)
        listeners = [_listen(nic.addr, 4 * k) for nic in self.cfg.nics]
        table = allgather(
            {"tcp": [s.getsockname() for s in listeners], "oob": self.oob.addresses()}
        )
        if any(len(entry["tcp"]) != k for entry in table):
            raise NetworkFailure("all ranks must have the same number of data NICs")
        if self.cfg.size > 1:
            self._dial_right(table[self.right]["tcp"])
            self._accept_left(listeners, k + (k if k > 1 else 0))
        for sock in listeners:
            sock.close()
        self.oob.start([[tuple(a) for a in entry["oob"]] for entry in table])

    def _dial_right(self, remote: list[list[Any]]) -> None:
        nics, k = self.cfg.nics, len(self.cfg.nics)
        plan = [(PRIMARY, i, i) for i in range(k)]
        if k > 1:
            plan += [(BACKUP, i, (i + 1) % k) for i in range(k)]
        for kind, channel, nic in plan:
            hello = HELLO.pack(MAGIC, self.cfg.rank, kind, channel, nic)
            addr, port = remote[nic]
            sock = _dial(nics[nic].addr, (str(addr), int(port)), hello)
            conn = SendConn(self, sock, channel, nics[nic], kind)
            if kind == PRIMARY:
                self.routes.append(conn)
            else:
                self.backups[nic] = conn
            self._log_connected(conn.channel, nic, self.right, kind, "Connect")

    def _accept_left(self, listeners: list[socket.socket], expected: int) -> None:
        left = (self.cfg.rank - 1) % self.cfg.size
        while len(self.recv_conns) < expected:
            ready, _, _ = select.select(listeners, [], [], 30)
            if not ready:
                raise NetworkFailure(f"timed out waiting for connections from rank {left}")
            for lsock in ready:
                sock, _ = lsock.accept()
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                head = bytearray(HELLO.size)
                if not _sock_recv_exact(sock, memoryview(head)):
                    raise NetworkFailure(f"bad hello from rank {left}")
                _, _peer, kind, channel, nic = HELLO.unpack(head)
                self.recv_conns.append(RecvConn(self, sock, channel, nic, kind))
                self._log_connected(channel, nic, left, kind, "Accept")

    def _log_connected(self, channel: int, nic: int, peer: int, kind: int, verb: str) -> None:
        name = self.cfg.nics[nic].name
        self.cfg.log.info(
            f"R2CC: Connection: {verb} COMPLETED channel={channel} dev={nic} ({name}) "
            f"peer={peer} type={KIND_NAMES[kind]}"
        )

    # ---- data path ---------------------------------------------------------------------
    def exchange(
        self, coll: int, g: int, send: memoryview, recv: memoryview, deadline: float | None
    ) -> None:
        """Send ``send`` to the right neighbour and receive ``recv`` from the left one.

        Both sides must call with the same ``g`` sequence. Returns when the received bytes
        are all in place and every sent share is acknowledged.
        """
        if len(recv):
            self.window.post(g, recv)
        if len(send):
            plan = self.weights or [(conn, 1.0) for conn in self.routes]
            pieces = split_bytes(len(send), [w for _, w in plan])
            for sid, ((conn, _), (off, length)) in enumerate(zip(plan, pieces, strict=True)):
                if length:
                    self._issue(Share(coll, g, sid, 0, off, send[off : off + length]), conn)
        self._wait(g, deadline)
        self.window.retire(g)

    def _issue(self, share: Share, conn: SendConn) -> None:
        share.conn, share.issued = conn, time.monotonic()
        with self.cond:
            self.outstanding[(share.g, share.sid)] = share
        conn.queue.put(share)

    def on_ack(self, conn: SendConn, g: int, sid: int) -> None:
        """Called by ack readers: share ``sid`` of step ``g`` arrived at the right rank."""
        with self.cond:
            share = self.outstanding.pop((g, sid), None)
            if share is not None and share.conn is conn:
                rate = len(share.view) / max(time.monotonic() - share.issued, 1e-6)
                conn.bw = rate if conn.bw == 0 else 0.7 * conn.bw + 0.3 * rate
            self.cond.notify_all()

    def _wait(self, g: int, deadline: float | None) -> None:
        while True:
            with self.cond:
                if self.window.complete(g) and not self.outstanding:
                    return
                self.cond.wait(POLL_S)
            now = time.monotonic()
            if deadline is not None and now > deadline:
                raise CollectiveTimeout(f"step {g} did not complete")
            self._check_stalls(now)

    def _check_stalls(self, now: float) -> None:
        if self.cfg.mode == 0 and any(rc.broken for rc in self.recv_conns):
            self.cfg.log.warn("NET/Socket : connection from the left neighbour closed")
            raise NetworkFailure("connection closed by peer")
        with self.cond:
            shares = list(self.outstanding.values())
        stalled: dict[int, tuple[SendConn, float]] = {}
        for share in shares:
            conn = share.conn
            assert conn is not None
            idle = now - max(share.issued, conn.last_progress)
            if conn.broken or idle > self.cfg.failover_timeout_s:
                stalled[id(conn)] = (conn, idle)
        for conn, idle in stalled.values():
            self._fail(conn, idle)

    # ---- failover ----------------------------------------------------------------------
    def _fail(self, conn: SendConn, idle: float) -> None:
        what = "failed" if conn.broken else f"stalled for {idle * 1000:.0f} ms"
        msg = f"NET/Socket : send to rank {self.right} on {conn.label()} {what}"
        self.cfg.log.warn(msg)
        if self.cfg.mode == 0:
            raise NetworkFailure(msg)
        self.failed.add(conn.nic.index)
        conn.retire()
        backup = self._pick_backup(conn.channel)
        if backup is None:
            raise NetworkFailure(f"{msg}; no healthy backup device left")
        for channel, route in enumerate(self.routes):
            if route is conn:
                self.routes[channel] = backup
                self._log_migration("SEND", channel, conn.nic.index, backup.nic.index)
        self._resend(conn, backup)
        self.oob.broadcast_hot_repair(self.failed)
        if self.cfg.mode >= 2:
            self._rebalance()

    def _pick_backup(self, channel: int) -> SendConn | None:
        k = len(self.cfg.nics)
        for step in range(1, k):
            conn = self.backups.get((channel + step) % k)
            if conn and conn.nic.index not in self.failed and not (conn.dead or conn.broken):
                return conn
        return None

    def _resend(self, old: SendConn, backup: SendConn) -> None:
        with self.cond:
            moved = [s for s in self.outstanding.values() if s.conn is old]
        for s in moved:
            self._issue(Share(s.coll, s.g, s.sid, s.attempt + 1, s.offset, s.view), backup)

    def _log_migration(self, side: str, channel: int, dev: int, backup: int) -> None:
        names = self.cfg.nics
        self.cfg.log.info(
            f"R2CC_MODE=1 ({side}): Channel {channel} will simulate disable of device {dev} "
            f"({names[dev].name}) and use backup device {backup} ({names[backup].name})"
        )

    def _rebalance(self) -> None:
        healthy = [c for c in self.routes if c.kind == PRIMARY and c.nic.index not in self.failed]
        healthy = healthy or [self.routes[0]]
        rates = [c.bw for c in healthy]
        fallback = max(rates) or 1.0
        self.weights = [(c, r or fallback) for c, r in zip(healthy, rates, strict=True)]
        if len(self.failed) == 1:
            self.cfg.log.info("R2CC: hot-repair detected, forcing R2CC_MODE=2")
        total = sum(w for _, w in self.weights)
        shares = " ".join(f"{c.nic.index}({c.nic.name})={w / total:.3f}" for c, w in self.weights)
        self.cfg.log.info(f"R2CC: rebalance over healthy devices by measured bandwidth: {shares}")

    def note_backup_recv(self, rc: RecvConn) -> None:
        """Log, once per channel, that the left neighbour moved a channel to its backup."""
        if rc.channel not in self.recv_noted:
            self.recv_noted.add(rc.channel)
            self._log_migration("RECV", rc.channel, rc.channel, rc.nic)

    def close(self) -> None:
        """Shut every connection down (call after a final barrier)."""
        self.closing = True
        with self.cond:
            self.window.closing = True
        for conn in [*self.routes, *self.backups.values()]:
            conn.retire()
            conn.sock.close()
        for rc in self.recv_conns:
            _shutdown(rc.sock)
            rc.sock.close()
        self.oob.close()
