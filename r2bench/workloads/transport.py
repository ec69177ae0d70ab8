"""Striped multi-NIC TCP ring transport with stall detection and R-2CCL's hot repair.

This is an *emulator* of R-2CCL's network transport for GPU-less testing: it is not NCCL.
Each ring hop (rank r -> rank r+1) opens, per data NIC i, a PRIMARY TCP connection from
NIC i of rank r to NIC i of rank r+1 (channel i), plus a pre-opened BACKUP connection for
channel i on NIC ``backup_nic(i, k)`` (``i XOR 1``: NICs pair up 0-1, 2-3; an odd last NIC
backs itself up), like R-2CCL's PRIMARY/BACKUP pair.

Protocol: every ring step carries a global step id ``g``. The sender splits the step's
chunk into *units* (one per channel in use) and sends ``header + payload`` on each channel's
current connection; the receiver places the payload at its offset in the destination buffer
and acknowledges ``(g, unit)`` on the same connection; while a receiver is not yet at step
``g`` it sends heartbeat frames instead, so a slow peer is not mistaken for a dead link. A
unit not acknowledged, with no send progress and no frame back on its connection for the
failover timeout, is a stall. The receiver completes a step when the bytes it received cover
the whole chunk; a resent unit (new id, flagged as a replacement) shuts down whatever older
unit still writes into the same range, so nothing arrives late.

The failure response, as R-2CCL's code has it, does not depend on R2CC_MODE: in every mode a
stalled channel is hot-repaired (the failed units are resent from their step on the channel's
BACKUP connection, a STEP_SYNC goes to the peer and HOT_REPAIR to every rank over the
out-of-band UDP sockets); at the start of the next collective every rank gathers the
failed-channel masks through the MPI control plane (OR per node, then globally, like
R-2CCL's bootstrap allgather), masks those channels off for the job's life and, from mode 0
or 1, runs as mode 2 from then on. One difference: R-2CCL's receiver detects the stall and
tells the sender; here the sender detects it (the unit not acknowledged), with the same
timeout, and tells the receiver. A channel already on its backup whose backup fails goes
back to its primary if that one is healthy (mode 1's simulated migration), else the job
aborts.

R2CC_MODE 1-3 only *simulate* a failure that did not happen (the caller computes which NICs
with :mod:`r2bench.config.r2ccl`): mode 1 puts NIC 0's channels on their backup from setup
(``simulated_migrated``); modes 2/3 mask the last NIC's channels off from the first
collective (``simulated_failed``). ``R2CC_DISCONNECTED_HCA`` (NIC names or indices) fails
those NICs' channels in software once, at step ``R2CC_DISCONNECTED_STEP`` (R-2CCL injects it
over IB only; this transport emulates the IB one there).

``stock=True`` emulates stock NCCL, the baseline: no backup connections, no out-of-band
socket, every R2CC_* setting ignored; a stalled or closed connection raises
:class:`NetworkFailure` (the job aborts).

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

from r2bench.config.r2ccl import DISCONNECTED_STEP_DEFAULT, MODE_AFTER_REPAIR, backup_nic

HEADER = struct.Struct("!IQQIIQQ")  # magic, coll, g, unit, flags, offset, nbytes
ACK = struct.Struct("!IQI")  # magic, g, unit
HELLO = struct.Struct("!IIIII")  # magic, rank, kind, channel, nic
MAGIC = 0x52324243  # "R2BC"
PRIMARY, BACKUP = 0, 1
KIND_NAMES = ("PRIMARY", "BACKUP")
POLL_S = 0.02
SCRATCH_BYTES = 1 << 20
HEARTBEAT = (1 << 64) - 1  # ack frame meaning "receiver alive, step not posted yet"
REPLACEMENT = 1  # header flag: this unit resends (part of) a unit that failed
HOT_REPAIR_TAG = "R2CC_HR"  # R-2CCL's out-of-band hot-repair message: "R2CC_HR <rank>"


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
    disconnected: frozenset[int] = frozenset()
    """NIC indices named by ``R2CC_DISCONNECTED_HCA`` (failed at ``disconnected_step``)."""
    disconnected_step: int = DISCONNECTED_STEP_DEFAULT
    simulated_failed: frozenset[int] = frozenset()
    """NICs masked off from the first collective (R2CC_MODE 2/3's simulated failure)."""
    simulated_migrated: frozenset[int] = frozenset()
    """NICs whose channels run on their backup from setup (R2CC_MODE 1's simulation)."""
    stock: bool = False
    """Stock NCCL: no backup connections, no out-of-band socket; a stall aborts the job."""


def disconnected_nics(text: str | None, nics: list[Nic]) -> frozenset[int]:
    """NIC indices that ``R2CC_DISCONNECTED_HCA`` names, as R-2CCL matches them.

    Tokens are separated by commas, spaces or tabs; a token matches a NIC by name, or, when
    numeric, by index or by the number after the last ``_`` of its name (``mlx5_2``)."""
    out = set()
    for token in (text or "").replace(",", " ").split():
        for nic in nics:
            suffix = nic.name.rpartition("_")[2] if "_" in nic.name else ""
            numbers = {str(nic.index), suffix} if token.isdigit() else set()
            if token == nic.name or str(int(token) if token.isdigit() else "") in numbers:
                out.add(nic.index)
    return frozenset(out)


@dataclass
class Share:
    """A unit: a contiguous byte range of one ring step, sent on one connection."""

    coll: int
    g: int
    sid: int
    flags: int
    offset: int
    view: memoryview
    channel: int
    issued: float = 0.0
    conn: SendConn | None = None


@dataclass
class Slot:
    """Receive state of one step: destination buffer, byte ranges received, claims."""

    view: memoryview
    nbytes: int
    covered: list[tuple[int, int]] = field(default_factory=list)
    seen: list[tuple[int, int, int]] = field(default_factory=list)  # (unit, start, end)
    claims: dict[int, tuple[RecvConn, int, int]] = field(default_factory=dict)

    def add(self, start: int, end: int) -> None:
        """Mark ``[start, end)`` received (merged with what is already covered)."""
        spans = sorted([*self.covered, (start, end)])
        merged: list[tuple[int, int]] = []
        for lo, hi in spans:
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        self.covered = merged

    def done(self) -> bool:
        """Every byte of the step is in place."""
        return self.nbytes == 0 or self.covered == [(0, self.nbytes)]

    def holds(self, start: int, end: int) -> bool:
        """``[start, end)`` is already fully received."""
        return any(lo <= start and end <= hi for lo, hi in self.covered)


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
    """Destination slots for incoming steps; arbitrates overlapping units.

    Units of one step that overlap are always a failed unit and its replacements (the
    sender keeps its live units disjoint and numbers replacements higher). So a unit is
    discarded when its range is already received or a newer overlapping unit was seen, and
    an older overlapping unit still writing is shut down before a newer one writes."""

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
        return slot is None or slot.done()

    def retire(self, g: int) -> None:
        """Forget step ``g`` once the caller has consumed it (no claim is left on it)."""
        with self.cond:
            self.slots.pop(g, None)

    def wait_posted(self, g: int, timeout: float) -> bool:
        """Wait up to ``timeout`` for step ``g`` to be posted (True also if already past)."""
        with self.cond:
            if g not in self.slots and g > self.latest and not self.closing:
                self.cond.wait(timeout)
            return g in self.slots or g <= self.latest or self.closing

    def claim(self, conn: RecvConn, g: int, sid: int, start: int, end: int) -> memoryview | None:
        """Reserve ``[start, end)`` of step ``g`` for unit ``sid``; None: discard the payload."""
        with self.cond:
            slot = self.slots.get(g)
            if slot is None or end > slot.nbytes or slot.holds(start, end):
                return None
            overlap = [u for u, lo, hi in slot.seen if lo < end and start < hi and u != sid]
            if any(u > sid for u in overlap):
                return None  # a newer unit replaced this one
            slot.seen.append((sid, start, end))
            while not self.closing and (
                older := [u for u in overlap if u in slot.claims and slot.claims[u][0] is not conn]
            ):
                for u in older:
                    _shutdown(slot.claims[u][0].sock)
                self.cond.wait(POLL_S)
            if self.closing or slot.holds(start, end):
                return None
            slot.claims[sid] = (conn, start, end)
            return slot.view

    def finish(self, g: int, sid: int, ok: bool) -> None:
        """Record the end of a claimed unit (``ok``: fully received)."""
        with self.cond:
            slot = self.slots.get(g)
            if slot is None:
                return
            held = slot.claims.pop(sid, None)
            if ok and held is not None:
                slot.add(held[1], held[2])
            self.cond.notify_all()


class SendConn:
    """Sending end of one TCP connection: a writer thread and an ack-reader thread."""

    def __init__(self, ring: RingTransport, sock: socket.socket, channel: int, nic: Nic, kind: int):
        self.ring, self.sock, self.channel, self.nic, self.kind = ring, sock, channel, nic, kind
        self.queue: queue.SimpleQueue[Share | None] = queue.SimpleQueue()
        self.last_progress = time.monotonic()
        self.dead = False
        self.broken = False
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
                MAGIC, share.coll, share.g, share.sid, share.flags, share.offset, len(share.view)
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
        magic, _coll, g, sid, _flags, offset, nbytes = HEADER.unpack(head)
        if magic != MAGIC:
            return False
        window = self.ring.window
        while not window.wait_posted(g, self.ring.heartbeat_s):
            if not self._send_ack(HEARTBEAT, 0):  # "alive, not ready yet": not a stall
                return False
        dest = window.claim(self, g, sid, offset, offset + nbytes)
        if dest is None:
            ok = self._discard(nbytes, scratch)
        else:
            ok = _sock_recv_exact(self.sock, dest[offset : offset + nbytes])
            window.finish(g, sid, ok)
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
        msg = f"{HOT_REPAIR_TAG} {self.cfg.rank}".encode() + b"\0"
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

    def step_sync(self, peer: int, channel: int, step: int, failed: set[int]) -> None:
        """Tell rank ``peer`` from which step channel ``channel`` continues on another NIC."""
        msg = f"STEP_SYNC {channel} {step}".encode() + b"\0"
        addrs = self.peers[peer] if peer < len(self.peers) else []
        for i, sock in enumerate(self.socks):
            if i not in failed and i < len(addrs):
                with contextlib.suppress(OSError):
                    sock.sendto(msg, addrs[i])
                break
        self.cfg.log.info(f"OOB: Sent STEP_SYNC channel={channel} step={step} to rank {peer}")

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
        if (
            len(parts) == 3
            and parts[0] == "STEP_SYNC"
            and parts[1].isdigit()
            and parts[2].isdigit()
        ):
            channel, step = parts[1], parts[2]
            self.cfg.log.info(
                f"OOB: Received STEP_SYNC channel={channel} step={step} from {src[0]}:{src[1]}"
            )
            self.cfg.log.info(
                f"RECV: Step-sync applied channel={channel} absStep={step}, switch to backup"
            )
        elif len(parts) == 2 and parts[0] == HOT_REPAIR_TAG and parts[1].isdigit():
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


Allgather = Callable[[object], list[Any]]
"""Every rank's value, in rank order (mpi4py's `comm.allgather`: values of any type)."""


def sleeping_allgather(comm: Any, spin_s: float = 0.002, poll_s: float = 0.0005) -> Allgather:
    """``comm.allgather`` that waits for a late rank asleep, not in MPI's busy poll.

    This is the emulator's own cost, not a model of R-2CCL's gather: MPI spins while it
    waits, and where ranks outnumber cores (3 ranks on a 2-core virtual testbed) the early
    ranks' spin takes the CPU from the ranks still computing: fault-free training steps ran
    1.6x slower than stock NCCL's, with 2-5 s outliers. An Ibarrier is tested in a tight loop for
    `spin_s` (ranks in step, as in a collective benchmark, meet within it at no added
    latency), then between sleeps; once every rank is there the allgather does not wait."""

    def gather(value: object) -> list[Any]:
        arrived = comm.Ibarrier()
        spin_until = time.monotonic() + spin_s
        while not arrived.Test():
            if time.monotonic() > spin_until:
                time.sleep(poll_s)
        return list(comm.allgather(value))

    return gather


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
        self.mode = cfg.mode
        self.allgather = allgather
        self.cond = threading.Condition()
        self.window = RecvWindow(self.cond)
        self.closing = False
        self.outstanding: dict[tuple[int, int], Share] = {}
        self.next_sid: dict[int, int] = {}
        self.failed: set[int] = set()  # NICs this rank saw fail (its failed-channel mask)
        # Channels masked off for good: the simulated failure of modes 2/3, then the gathered ones.
        self.masked: set[int] = set(cfg.simulated_failed)
        self.gathered = 0
        self.injected: set[int] = set()  # R2CC_DISCONNECTED_HCA fired on these channels
        self.routes: list[SendConn] = []  # channel -> connection it sends on now
        self.primaries: list[SendConn] = []
        self.backups: dict[int, SendConn] = {}  # channel -> its BACKUP connection
        self.recv_conns: list[RecvConn] = []
        self.oob = None if cfg.stock else OobNet(cfg)
        self.right = (cfg.rank + 1) % cfg.size
        self.heartbeat_s = min(0.1, cfg.failover_timeout_s / 4)
        self._connect(allgather)

    @property
    def with_backups(self) -> bool:
        """Whether every channel has a BACKUP connection (R-2CCL with more than one NIC)."""
        return len(self.cfg.nics) > 1 and not self.cfg.stock

    # ---- setup -------------------------------------------------------------------------
    def _connect(self, allgather: Allgather) -> None:
        k = len(self.cfg.nics)
        listeners = [_listen(nic.addr, 4 * k) for nic in self.cfg.nics]
        oob = self.oob.addresses() if self.oob else []
        table = allgather({"tcp": [s.getsockname() for s in listeners], "oob": oob})
        if any(len(entry["tcp"]) != k for entry in table):
            raise NetworkFailure("all ranks must have the same number of data NICs")
        if self.cfg.size > 1:
            self._dial_right(table[self.right]["tcp"])
            self._accept_left(listeners, 2 * k if self.with_backups else k)
        for sock in listeners:
            sock.close()
        if self.oob:
            self.oob.start([[tuple(a) for a in entry["oob"]] for entry in table])
            self._log_simulations()

    def _log_simulations(self) -> None:
        """R-2CCL's setup lines for R2CC_MODE 1's migration and R2CC_DISCONNECTED_HCA."""
        for channel in sorted(self.cfg.simulated_migrated):
            backup = backup_nic(channel, len(self.cfg.nics))
            for side in ("SEND", "RECV"):
                self._log_migration(side, channel, channel, backup)
        for nic in sorted(self.cfg.disconnected):
            name = self.cfg.nics[nic].name
            for side in ("SEND", "RECV"):
                self.cfg.log.info(
                    f"R2CC_DISCONNECTED_HCA: {side} channel {nic} primary dev={nic} ({name}) "
                    f"will inject failure at step {self.cfg.disconnected_step}"
                )

    def _dial_right(self, remote: list[list[Any]]) -> None:
        nics, k = self.cfg.nics, len(self.cfg.nics)
        plan = [(PRIMARY, i, i) for i in range(k)]
        if self.with_backups:
            plan += [(BACKUP, i, backup_nic(i, k)) for i in range(k)]
        for kind, channel, nic in plan:
            hello = HELLO.pack(MAGIC, self.cfg.rank, kind, channel, nic)
            addr, port = remote[nic]
            sock = _dial(nics[nic].addr, (str(addr), int(port)), hello)
            conn = SendConn(self, sock, channel, nics[nic], kind)
            if kind == PRIMARY:
                self.primaries.append(conn)
            else:
                self.backups[channel] = conn
            if not self.cfg.stock:
                self.cfg.log.info(
                    f"Connection: Connect COMPLETED rank={self.cfg.rank} channel={channel} "
                    f"type={KIND_NAMES[kind]} dev={nic} sendComm={_comm_id(sock)}"
                )
        self.routes = [
            self.backups[c] if c in self.cfg.simulated_migrated and c in self.backups else conn
            for c, conn in enumerate(self.primaries)
        ]

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
                if not self.cfg.stock:
                    self.cfg.log.info(
                        f"Connection: Accept COMPLETED rank={self.cfg.rank} channel={channel} "
                        f"type={KIND_NAMES[kind]} dev={nic} recvComm={_comm_id(sock)} "
                        f"from remoteRank={left}"
                    )

    # ---- collective boundaries -----------------------------------------------------------
    def begin_collective(self) -> None:
        """Start of a collective call: gather the failed-channel masks (R-2CCL, every mode).

        Every rank calls this at the same point (it is collective, over the MPI control
        plane): masks are OR-ed per node, then globally. A new global mask is logged, masks
        those channels off for good, and switches a mode 0 or 1 job to mode 2 (as R-2CCL
        does). Stock NCCL has no such step."""
        if self.cfg.stock or self.cfg.size < 2:
            return
        mine = sum(1 << nic for nic in self.failed)
        table = self.allgather((socket.gethostname(), mine))
        host = socket.gethostname()
        local = 0
        total = 0
        for name, mask in table:
            total |= mask
            local |= mask if name == host else 0
        if total == self.gathered:
            return
        self.gathered = total
        self.cfg.log.info(
            f"R2CC: hot-repair gather complete: localMask={local:#x} globalMask={total:#x}"
        )
        if self.mode < MODE_AFTER_REPAIR:
            self.cfg.log.info(f"R2CC: hot-repair detected, forcing R2CC_MODE={MODE_AFTER_REPAIR}")
            self.mode = MODE_AFTER_REPAIR
        self.masked |= {nic for nic in range(len(self.cfg.nics)) if total >> nic & 1}

    def _plan(self) -> list[SendConn]:
        """Connections a new step is striped over, equal shares: every channel not masked
        off, on the connection it runs on now (its primary, or its backup after a repair)."""
        plan = [conn for c, conn in enumerate(self.routes) if c not in self.masked]
        if not plan:
            raise NetworkFailure("every channel is masked off: no healthy device left")
        return plan

    # ---- data path ---------------------------------------------------------------------
    def exchange(
        self, coll: int, g: int, send: memoryview, recv: memoryview, deadline: float | None
    ) -> None:
        """Send ``send`` to the right neighbour and receive ``recv`` from the left one.

        Both sides must call with the same ``g`` sequence. Returns when the received bytes
        are all in place and every sent unit is acknowledged.
        """
        if len(recv):
            self.window.post(g, recv)
        if g >= self.cfg.disconnected_step:
            self._inject_disconnect(g)
        if len(send):
            plan = self._plan()
            pieces = split_bytes(len(send), [1.0] * len(plan))
            for conn, (off, length) in zip(plan, pieces, strict=True):
                if length:
                    view = send[off : off + length]
                    self._issue(Share(coll, g, self._sid(g), 0, off, view, conn.channel), conn)
        self._wait(g, deadline)
        self.window.retire(g)
        self.next_sid.pop(g, None)

    def _sid(self, g: int) -> int:
        sid = self.next_sid.get(g, 0)
        self.next_sid[g] = sid + 1
        return sid

    def _inject_disconnect(self, g: int) -> None:
        """R2CC_DISCONNECTED_HCA: fail the named devices' channels once, at the configured
        step (every channel carries every step here, so its step count is ``g``)."""
        for nic in sorted(self.cfg.disconnected - self.injected):
            self.injected.add(nic)
            conn = self.primaries[nic]
            msg = f"R2CC_DISCONNECTED_HCA: SEND {conn.label()} injected failure at step {g}"
            self.cfg.log.info(msg)
            if self.routes[nic] is conn and nic not in self.masked:
                self._fail(conn, msg)

    def _issue(self, share: Share, conn: SendConn) -> None:
        share.conn, share.issued = conn, time.monotonic()
        with self.cond:
            self.outstanding[(share.g, share.sid)] = share
        conn.queue.put(share)

    def on_ack(self, conn: SendConn, g: int, sid: int) -> None:
        """Called by ack readers: unit ``sid`` of step ``g`` arrived at the right rank."""
        with self.cond:
            share = self.outstanding.get((g, sid))
            if share is not None and share.conn is conn:
                del self.outstanding[(g, sid)]
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
        if self.cfg.stock and any(rc.broken for rc in self.recv_conns):
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
            what = "failed" if conn.broken else f"stalled for {idle * 1000:.0f} ms"
            msg = f"NET/Socket : send to rank {self.right} on {conn.label()} {what}"
            self.cfg.log.warn(msg)
            self._fail(conn, msg)

    # ---- failure evidence (a shrinking job's agreement on who failed) ---------------------
    def send_stalled(self, idle_s: float) -> bool:
        """Some unit sent to the right neighbour is unacknowledged and its connection has made
        no progress for ``idle_s`` (or broke): this rank's data does not leave."""
        now = time.monotonic()
        with self.cond:
            shares = list(self.outstanding.values())
        for share in shares:
            conn = share.conn
            if conn is not None and (
                conn.broken or now - max(share.issued, conn.last_progress) > idle_s
            ):
                return True
        return False

    def recv_broken(self) -> bool:
        """A connection from the left neighbour broke."""
        return any(rc.broken for rc in self.recv_conns)

    # ---- hot repair --------------------------------------------------------------------
    def _fail(self, conn: SendConn, msg: str) -> None:
        """``conn`` failed: stock NCCL aborts; R-2CCL, in every mode, resends its units from
        their step on the channel's other connection and signals the repair out of band."""
        if self.cfg.stock or self.oob is None:
            raise NetworkFailure(msg)
        self.failed.add(conn.nic.index)
        conn.retire()
        with self.cond:
            moved = sorted(
                (s for s in self.outstanding.values() if s.conn is conn), key=lambda s: s.g
            )
            for s in moved:
                del self.outstanding[(s.g, s.sid)]
        channel = conn.channel
        if self.routes[channel] is conn:
            target = self._other_connection(channel, conn)
            if target is None:
                raise NetworkFailure(f"{msg}; no healthy connection left for channel {channel}")
            self.routes[channel] = target
        route = self.routes[channel]
        for s in moved:
            self._issue(self._replacement(s, 0, len(s.view), route), route)
        if moved:
            step = moved[0].g
            self.cfg.log.info(
                f"SEND: Step-sync applied channel={channel} absStep={step}, switch to "
                f"{KIND_NAMES[route.kind].lower()} dev={route.nic.index} ({route.nic.name})"
            )
            self.oob.step_sync(self.right, channel, step, self.failed)
        self.oob.broadcast_hot_repair(self.failed)

    def _other_connection(self, channel: int, failed: SendConn) -> SendConn | None:
        """The channel's connection that is not ``failed``, if healthy: its backup (or, for a
        channel already on its backup, its primary)."""
        for conn in (self.primaries[channel], self.backups.get(channel)):
            usable = conn is not None and conn is not failed and not (conn.dead or conn.broken)
            if usable and conn is not None and conn.nic.index not in self.failed:
                return conn
        return None

    def _replacement(self, s: Share, off: int, length: int, target: SendConn) -> Share:
        view = s.view[off : off + length]
        return Share(s.coll, s.g, self._sid(s.g), REPLACEMENT, s.offset + off, view, target.channel)

    def _log_migration(self, side: str, channel: int, dev: int, backup: int) -> None:
        names = self.cfg.nics
        self.cfg.log.info(
            f"R2CC_MODE=1 ({side}): Channel {channel} will simulate disable of device {dev} "
            f"({names[dev].name}) and use backup device {backup} ({names[backup].name})"
        )

    def close(self) -> None:
        """Shut every connection down (call after a final barrier)."""
        self.closing = True
        with self.cond:
            self.window.closing = True
        for conn in [*self.primaries, *self.backups.values()]:
            conn.retire()
            conn.sock.close()
        for rc in self.recv_conns:
            _shutdown(rc.sock)
            rc.sock.close()
        if self.oob:
            self.oob.close()


def _comm_id(sock: socket.socket) -> str:
    """A stable pointer-like id for a connection in log lines (R-2CCL prints a pointer)."""
    return f"{id(sock):#x}"
