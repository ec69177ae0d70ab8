"""Remove a virtual testbed: exactly what its manifest names, plus its leftover namespaces."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from r2bench.errors import EnvironmentFailure, ExitCode
from r2bench.testbeds.virtual.layout import host_ifname, owns_netns
from r2bench.testbeds.virtual.runner import run, succeeds
from r2bench.testbeds.virtual.statedir import Manifest, StatePaths

KILL_WAIT_S = 2.0


class TestbedError(EnvironmentFailure, RuntimeError):
    """A virtual testbed operation failed; `exit_code` 2 = refused up front, 1 = failed."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, message: str, exit_code: int = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)


def list_netns() -> list[str]:
    """Names of the network namespaces `ip netns` knows."""
    out = run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def cmdline(pid: int) -> str | None:
    """Command line of `pid` (NULs as spaces), or None when it is gone (or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace") or None


def owned_pid(pid: int, marker: str) -> bool:
    """True when `pid` is alive and its command line names `marker` (the state dir)."""
    text = cmdline(pid)
    return text is not None and marker in text


def netns_pids(netns: str) -> list[int]:
    """Processes inside namespace `netns` (all started through the testbed)."""
    result = run(["ip", "netns", "pids", netns], check=False)
    return [int(tok) for tok in result.stdout.split() if tok.isdigit()]


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop_pids(pids: list[int]) -> None:
    """SIGTERM `pids`, then SIGKILL whatever is left after KILL_WAIT_S."""
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline and any(cmdline(pid) is not None for pid in pids):
        time.sleep(0.02)
    _signal([pid for pid in pids if cmdline(pid) is not None], signal.SIGKILL)


def sshd_pids(manifest: Manifest) -> list[int]:
    """Pids of the testbed's sshds still alive (recorded or from pid files, cmdline checked)."""
    pids = {entry["pid"] for entry in manifest.of_kind("pid")}
    for entry in manifest.of_kind("sshd"):
        text = (
            Path(entry["pidfile"]).read_text().strip() if Path(entry["pidfile"]).is_file() else ""
        )
        if text.isdigit():
            pids.add(int(text))
    return sorted(pid for pid in pids if owned_pid(pid, manifest.state_dir))


def _namespaces(name: str, manifest: Manifest | None) -> list[str]:
    existing = list_netns()
    recorded = [e["name"] for e in manifest.of_kind("netns")] if manifest else []
    return [ns for ns in existing if ns in recorded or owns_netns(name, ns)]


def _links(name: str, manifest: Manifest | None) -> list[str]:
    recorded = [e["name"] for e in manifest.of_kind("link")] if manifest else [host_ifname(name)]
    return [link for link in recorded if succeeds(["ip", "link", "show", "dev", link])]


def _remove_paths(manifest: Manifest) -> int:
    removed = 0
    for entry in reversed(manifest.entries):
        path = Path(entry.get("path", ""))
        if entry["kind"] == "path" and path.is_file():
            path.unlink()
            removed += 1
        elif entry["kind"] == "dir" and path.is_dir():
            shutil.rmtree(path)
            removed += 1
    return removed


def _remove_state(manifest: Manifest) -> None:
    state = Path(manifest.state_dir)
    StatePaths(state).manifest.unlink(missing_ok=True)
    if manifest.info.get("created_state_dir") and state.is_dir() and not any(state.iterdir()):
        state.rmdir()


def teardown(name: str, state_dir: Path, progress: Callable[[str], None]) -> list[str]:
    """Remove testbed `name`; returns what was done (empty: nothing to do). Safe to repeat."""
    manifest = Manifest.load(state_dir)
    done: list[str] = []
    if manifest is not None and (pids := sshd_pids(manifest)):
        stop_pids(pids)
        done.append(f"stopped sshd pids {pids}")
    namespaces = _namespaces(name, manifest)
    for ns in namespaces:
        if pids := netns_pids(ns):
            stop_pids(pids)
            done.append(f"stopped processes {pids} in {ns}")
    for link in _links(name, manifest):
        run(["ip", "link", "del", "dev", link])
        done.append(f"deleted link {link}")
    for ns in namespaces:
        run(["ip", "netns", "del", ns])
        done.append(f"deleted namespace {ns}")
    if manifest is not None:
        if count := _remove_paths(manifest):
            done.append(f"removed {count} files under {state_dir}")
        _remove_state(manifest)
        done.append(f"removed manifest {StatePaths(state_dir).manifest}")
    for line in done:
        progress(line)
    return done
