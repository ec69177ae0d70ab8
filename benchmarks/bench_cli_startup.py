"""Benchmark: how long `r2bench --version` and `r2bench --help` take, start to exit.

Each is run in a fresh Python process, as the `r2bench` console script runs it (`main()` of
`r2bench.entry`), several times; the median wall time of each is printed beside the target on
2 idle cores: <= 0.2 s for both. Exits 1 when a median misses the target.

Beside it: the median CPU time (user + system) of the same processes, which other load on the
machine barely changes (on an idle machine it is close to the wall time), and a fresh
interpreter that does nothing, timed the same way, for scale.

`r2bench --help` is printed by `r2bench.tophelp` from the command table with rich alone (no
typer, click or command module: about 25 ms of imports), the same bytes as typer's rich help
of the whole command line (tests/integration/test_top_help.py); the rest is the interpreter.
On a busy machine the wall time grows with the load while the CPU time stays: compare the
CPU time with the bare interpreter's.

    python benchmarks/bench_cli_startup.py [--repeats 11]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_S = 0.2
ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINT = 'import sys; sys.argv[0] = "r2bench"; from r2bench.entry import main; main()'


@dataclass(frozen=True)
class Timing:
    """The median wall and CPU time of one command line over fresh processes."""

    label: str
    median_s: float
    median_cpu_s: float
    checked: bool
    """Whether the target applies (the bare interpreter is shown for scale only)."""

    @property
    def missed(self) -> bool:
        """Whether a checked command is slower than the target."""
        return self.checked and self.median_s > TARGET_S


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(label: str, code: str, args: list[str], repeats: int, checked: bool) -> Timing:
    """`python -c code args...` in `repeats` fresh processes (output discarded)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    wall, cpu = [], []
    for _ in range(repeats):
        started, cpu_before = time.perf_counter(), _children_cpu_s()
        subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,  # `python -c` imports from its folder first: the tree measured is ROOT's
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        wall.append(time.perf_counter() - started)
        cpu.append(_children_cpu_s() - cpu_before)
    return Timing(label, statistics.median(wall), statistics.median(cpu), checked)


def measure(repeats: int) -> list[Timing]:
    """The bare interpreter, `r2bench --version` and `r2bench --help`."""
    return [
        time_command("python -c pass", "pass", [], repeats, checked=False),
        time_command("r2bench --version", ENTRY_POINT, ["--version"], repeats, checked=True),
        time_command("r2bench --help", ENTRY_POINT, ["--help"], repeats, checked=True),
    ]


def main() -> int:
    """Time, print, and return 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11, help="fresh processes per command")
    repeats = parser.parse_args().repeats
    timings = measure(repeats)
    for timing in timings:
        target = f"(target <= {TARGET_S:.1f} s)" if timing.checked else "(for scale)"
        verdict = "MISSED" if timing.missed else ""
        print(
            f"{timing.label:18} wall {timing.median_s:6.3f} s {target:22} "
            f"cpu {timing.median_cpu_s:6.3f} s  (medians of {repeats}) {verdict}"
        )
    return 1 if any(timing.missed for timing in timings) else 0


if __name__ == "__main__":
    sys.exit(main())
