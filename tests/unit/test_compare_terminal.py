"""`compare` in a terminal of 80 columns: the verdict first, rows grouped under their series,
columns dropped or abbreviated rather than squeezed, long notes under the table."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import yaml
from rich.cells import cell_len
from rich.console import Console

from r2bench.compare.policy import load_policy
from r2bench.compare.samples import load_sweep
from r2bench.compare.terminal import LAYOUTS, choose, print_details, print_verdict
from r2bench.compare.verdict import Comparison, compare_sweeps
from tests.support import paths
from tests.support.cli_runner import invoke_as_main
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA
SHAPE = {"modes": (None, "1"), "sizes": 4, "iterations": 6, "repeats": 3}
XFAIL_REASON = (
    "stock NCCL has no failover: it crashes when a NIC dies, and this reason is long enough "
    "to wrap twice at eighty columns"
)
HEADER_80 = ["cell", "metric", "change", "interval", "n", "verdict", "note"]


def _render(cmp: Comparison, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    print_verdict(cmp, console)
    print_details(cmp, console, everything=True)
    return console.export_text().splitlines()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    """Regressions (mode 1 now crashes under the fault), an xfail with a long reason, and
    undecided rows (the crashed runs' few samples)."""
    root = tmp_path_factory.mktemp("terminal")
    write_sample_sweep(root, DATA / "nccl-tests", SampleConfig(sweep="base", seed=1, **SHAPE))  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as mp:
        from tests.support import sample_sweep

        mp.setattr(sample_sweep, "MODE_SLOWDOWN", {"2": 1.4})  # mode 1 dies at the fault
        write_sample_sweep(root, DATA / "nccl-tests", SampleConfig(sweep="crash", seed=4, **SHAPE))  # type: ignore[arg-type]
    policy_file = root / "policy.yaml"
    policy_file.write_text(
        yaml.safe_dump({"xfail": [{"match": {"library": "nccl"}, "reason": XFAIL_REASON}]})
    )
    return compare_sweeps(load_sweep(root / "base"), load_sweep(root / "crash"),
                          load_policy(policy_file))  # fmt: skip


def _assert_readable(lines: list[str], width: int) -> None:
    too_wide = [line for line in lines if cell_len(line.rstrip()) > width]
    assert not too_wide, too_wide
    header = next(line for line in lines if line.startswith("cell "))
    assert header.split() == HEADER_80, header  # no column name folded
    for line in lines:
        # a folded verdict would leave a fragment such as `undeci` or `regres`
        assert not any(w in line.split() for w in ("undeci", "regres", "improv")), line


def test_eighty_columns_no_column_squeezed(mixed: Comparison) -> None:
    layout, widths = choose(mixed, mixed.rows, 80)
    assert min(widths) >= 4 and sum(widths) + 2 * (len(widths) - 1) <= 80
    assert layout is LAYOUTS[-1]  # values and bound gave way, not the cell names
    lines = _render(mixed, 80)
    _assert_readable(lines, 80)
    assert lines[0].startswith("REGRESSION: ")
    text = " ".join(" ".join(lines).split())
    assert XFAIL_REASON in text  # a footnote under the table, whole
    assert "bounds: ±5% (busbw, time)" in text
    assert "r2ccl nic_down mode=1" in lines  # the series, on a line of its own


def test_a_wide_terminal_shows_every_column(mixed: Comparison) -> None:
    lines = _render(mixed, 250)
    header = next(line for line in lines if line.startswith("cell "))
    assert header.split() == [
        "cell", "metric", "baseline", "candidate", "change", "interval", "n", "bound",
        "verdict", "note",
    ]  # fmt: skip
    assert any(XFAIL_REASON in line for line in lines)  # inline, no footnote
    assert not any(line.startswith("[1] ") for line in lines)


def test_the_quickstart_sweep_at_eighty_columns(tmp_path: Path) -> None:
    sweep = tmp_path / "quickstart"
    shutil.copytree(DATA / "quickstart-sweep", sweep, ignore=shutil.ignore_patterns("*.md"))
    ran = invoke_as_main("compare", str(sweep), str(sweep), "--all", env={"COLUMNS": "80"})
    assert ran.exit_code == 0, ran.output
    stdout = ran.output.replace(ran.stderr, "")
    lines = stdout.splitlines()
    _assert_readable(lines, 80)
    assert lines[0] == "PASSED: no regression in 78 rows (78 same)"
    # the long series label is a heading, whole; the rows under it name the cell only
    heading = "nccl-emulated nic1-down NCCL_IB_RETRY_CNT=3 NCCL_IB_TIMEOUT=14"
    at = lines.index(heading)
    assert lines[at + 1].split()[:3] == ["1M", "in-place", "busbw"]
