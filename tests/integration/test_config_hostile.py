"""Hostile config input: deep nesting, huge and non-finite numbers, YAML tags, and problems in
both files at once. Nothing may escape as a traceback; numbers that reach a node's command line
are finite, bounded and plain decimals.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_config_hostile.py (its pure tests).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from r2bench.config.source import MAX_DEPTH
from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths
from tests.support.config_hostile import SWEEP_BOMB, assert_plain_numbers, nest, outcome

CORPUS = paths.CORPUS
TESTBED = CORPUS / "testbed.yaml"
PAPER = paths.REPO / "experiments" / "paper" / "one-nic-down.yaml"
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# ---- huge and non-finite numbers -----------------------------------------------------------

NUMBERS = st.one_of(
    st.integers(-(10**500), 10**500),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([".inf", "-.inf", ".nan", "1e400", "9" * 400, "1e-400", "0x1p1024"]),
)
NUMERIC_FIELDS = [
    "deadline_s: {}",
    "repeats: {}",
    "nodes: {}",
    "gpus_per_node: {}",
    "options: {{iterations: {}}}",
    "options: {{warmup: {}}}",
    "options: {{cycles: {}}}",
    "options: {{timeout_s: {}}}",
    "sizes: [{}]",
    "sizes: {{begin: 8, end: {}}}",
    "sizes: {{begin: 8, end: 1G, factor: {}}}",
    'sizes: ["{}G"]',
]


@SETTINGS
@given(
    depth=st.integers(1, 3000),
    kinds=st.lists(st.sampled_from(["l", "m"]), min_size=1, max_size=4),
    key=st.sampled_from(["extra", "options", "env", "sweep", "sizes", "collectives"]),
)
def test_random_nesting_is_a_located_error_never_a_traceback(
    tmp_path: Path, depth: int, kinds: list[str], key: str
) -> None:
    text = PAPER.read_text()
    text = re.sub(rf"(?m)^{key}:.*(\n  .*)*\n", "", text) + f"{key}: {nest(depth, kinds)}\n"
    error = outcome(tmp_path, text)
    if depth + 1 > MAX_DEPTH:
        assert error is not None and "nested deeper than" in str(error), str(error)


@SETTINGS
@given(number=NUMBERS, field=st.sampled_from(NUMERIC_FIELDS))
def test_huge_numbers_are_located_errors_or_plain_bounded_values(
    tmp_path: Path, number: object, field: str
) -> None:
    text = str(number) if not isinstance(number, float) else repr(number)
    line = field.format(text)
    key = line.split(":")[0]
    base = re.sub(rf"(?m)^{key}:.*(\n  .*)*\n", "", PAPER.read_text())
    error = outcome(tmp_path, base + line + "\n")
    if error is None:
        assert_plain_numbers(make_plan(load_inputs(tmp_path / "hostile.yaml", TESTBED)))


@SETTINGS
@given(
    after=NUMBERS,
    duration=NUMBERS,
)
def test_huge_fault_times_never_reach_the_injector_unbounded(
    tmp_path: Path, after: object, duration: object
) -> None:
    def text(value: object) -> str:
        return repr(value) if isinstance(value, float) else str(value)

    body = PAPER.read_text().replace("after_s: 5", f"after_s: {text(after)}")
    body = body.replace("duration_s: 60", f"duration_s: {text(duration)}")
    body = body.replace("deadline_s: 900", "deadline_s: 604800")
    error = outcome(tmp_path, body)
    if error is None:
        assert_plain_numbers(make_plan(load_inputs(tmp_path / "hostile.yaml", TESTBED)))


def test_a_sweep_of_ten_million_runs_is_refused_fast_in_little_memory(tmp_path: Path) -> None:
    """Before: 10^7 points were built (MemoryError after minutes); now the product of the
    dimension sizes is counted first. Measured in a child process: time and peak RSS."""
    import subprocess
    import sys
    import time

    assert len(SWEEP_BOMB) <= 260
    path = tmp_path / "bomb.yaml"
    path.write_text(SWEEP_BOMB)
    # The child reports its own peak RSS (VmHWM: the high-water mark of its own address space;
    # ru_maxrss would include this big test process, copied at fork before the exec).
    code = (
        "import sys\nfrom r2bench.cli import main\n"
        "try:\n    main()\nfinally:\n"
        "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "    print('peak_kb', hwm.split()[1], file=sys.stderr)"
    )
    args = [sys.executable, "-c", code, "plan", str(path), "-t", str(TESTBED)]
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    peak_mb = int(proc.stderr.rsplit("peak_kb ", 1)[1].split()[0]) / 1024
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:5:1: sweep: the sweep expands to 10000000 runs" in proc.stderr, proc.stderr
    assert "limit is 100000" in proc.stderr and "max_runs" in proc.stderr
    assert elapsed < 2.0 + 3.0, elapsed  # 2 s of work, plus the interpreter's start on a busy CI
    assert peak_mb < 200, peak_mb


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("which", ["experiment", "testbed"])
def test_a_device_or_fifo_given_as_a_config_is_refused_unread(
    tmp_path: Path, special: str, which: str
) -> None:
    import os
    import subprocess
    import sys

    target = Path(special)
    if special == "fifo":
        target = tmp_path / "config.yaml"
        os.mkfifo(target)
    experiment, testbed = (target, TESTBED) if which == "experiment" else (PAPER, target)
    # The child reports its own peak RSS: RUSAGE_CHILDREN here would be the largest of every
    # child this test process ever waited for.
    code = (
        "import resource, sys\nfrom r2bench.cli import main\n"
        "try:\n    main()\nfinally:\n"
        "    print('peak_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
    )
    args = [sys.executable, "-c", code, "plan", str(experiment), "-t", str(testbed)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert f"{target}: <top level>: a config file is not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr
