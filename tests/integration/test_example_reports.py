"""The committed example sweeps (results/examples/) rebuild to exactly their committed report
and tables: a change to what the report or the tables say shows up here, and its author
regenerates the examples on purpose (results/examples/README.md says how).

Masked in the comparison: the plotly.js bundle inlined in the page's head (the installed
plotly's bytes, not the report's content) and any random plot id (none today: the figure ids are
named, `figure-<id>`). The report itself must be deterministic: it names the sweep folder, not
the path it was built from, and no wall-clock time.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from r2bench.commands.report import REPORT_NAME, report_command
from r2bench.runfolder.runformat import TABLES_DIR
from tests.support import paths

EXAMPLES = paths.REPO / "results" / "examples"
REPORTED = sorted(p.parent.name for p in EXAMPLES.glob(f"*/{REPORT_NAME}"))
PLOTLY_JS = re.compile(r"<script type='text/javascript'>.*?</script>", re.S)
RANDOM_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
REGENERATE = (
    "the rebuilt {what} of results/examples/{name} differs from the committed one: if the "
    "change is meant, regenerate the examples (results/examples/README.md, 'Rebuilding the "
    "reports') and commit them with the change"
)


def masked(page: str) -> str:
    """The page with what may legitimately vary masked: the inlined plotly.js (its first
    script) and random plot ids."""
    page = PLOTLY_JS.sub("<script>plotly.js</script>", page, count=1)
    return RANDOM_ID.sub("<plot-id>", page)


def rebuilt(name: str, into: Path) -> Path:
    """A copy of example sweep NAME (its run folders only) with its report and tables rebuilt
    by `r2bench report`; returns the copy's folder (named as the example)."""
    sweep = into / name
    shutil.copytree(EXAMPLES / name, sweep, ignore=shutil.ignore_patterns(TABLES_DIR, REPORT_NAME))
    assert report_command(sweep, None, None) == 0
    return sweep


def first_difference(a: str, b: str) -> str:
    """Where two texts first differ, with a little context of each."""
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return f"at character {at}:\n committed: {a[at - 80 : at + 80]!r}\n rebuilt:   {b[at - 80 : at + 80]!r}"


def test_the_examples_with_a_report_are_found() -> None:
    assert REPORTED == [
        "gpu-disconnected-hca",
        "gpu-faults",
        "gpu-netns-link-fault",
        "gpu-overhead",
        "gpu-training-link-fault",
        "virtual-training",
    ]


@pytest.mark.parametrize("name", REPORTED)
def test_example_rebuilds_to_its_committed_report_and_tables(name: str, tmp_path: Path) -> None:
    sweep = rebuilt(name, tmp_path)
    committed = masked((EXAMPLES / name / REPORT_NAME).read_text(encoding="utf-8"))
    page = masked((sweep / REPORT_NAME).read_text(encoding="utf-8"))
    assert page == committed, REGENERATE.format(what=REPORT_NAME, name=name) + (
        "; " + first_difference(committed, page)
    )
    tables = sorted(p.name for p in (EXAMPLES / name / TABLES_DIR).glob("*.csv"))
    assert tables, f"results/examples/{name}/{TABLES_DIR} has no CSV table"
    for table in tables:
        want = (EXAMPLES / name / TABLES_DIR / table).read_text(encoding="utf-8")
        got = (sweep / TABLES_DIR / table).read_text(encoding="utf-8")
        assert got == want, REGENERATE.format(what=f"{TABLES_DIR}/{table}", name=name)


def test_report_names_no_build_path_and_no_build_time(tmp_path: Path) -> None:
    """Built twice, from two folders, the page is byte for byte the same."""
    name = "gpu-disconnected-hca"
    first = rebuilt(name, tmp_path / "a")
    second = rebuilt(name, tmp_path / "elsewhere" / "b")
    page = (first / REPORT_NAME).read_text(encoding="utf-8")
    assert str(tmp_path) not in page
    assert page == (second / REPORT_NAME).read_text(encoding="utf-8"), first_difference(
        page, (second / REPORT_NAME).read_text(encoding="utf-8")
    )
