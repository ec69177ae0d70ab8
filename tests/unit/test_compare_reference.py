"""A reference file's numbers: finite, whole where they count; any other is refused by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cli_runner import invoke_wide

# ---- a reference file's numbers: finite, whole where they count -------------------------------


@pytest.fixture(scope="module")
def reference(small_sweep: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.yaml"
    invoke_wide("compare", str(small_sweep), str(small_sweep), "--write-reference", str(path))
    assert path.is_file()  # the gate's verdict (too few repeats here) does not matter
    return path


VALUE = r"busbw_gbps: \[[^,]+,"
LOWER = r"(busbw_gbps: \[[^,]+), [^,]+,"


@pytest.mark.parametrize(
    ("pattern", "replacement", "field"),
    [
        *((r"\bn: \d+", f"n: {v}", "n") for v in (".inf", "-.inf", "1e400", ".nan", "-3", "2.5")),
        *((VALUE, f"busbw_gbps: [{v},", "busbw_gbps") for v in (".inf", ".nan", "-.inf", "x")),
        *((LOWER, rf"\1, {v},", "busbw_gbps") for v in (".inf", ".nan", "x")),
    ],
)
def test_non_finite_or_fractional_reference_numbers_are_refused_by_name(
    small_sweep: Path, reference: Path, tmp_path: Path, pattern: str, replacement: str, field: str
) -> None:
    text = reference.read_text()
    path = tmp_path / "ref.yaml"
    path.write_text(re.sub(pattern, replacement, text, count=1))
    assert path.read_text() != text
    result = invoke_wide("compare", str(path), str(small_sweep))
    assert result.exit_code == 2, result.output
    assert f"cells[0].{field}" in result.output and str(path) in result.output.replace("\n", "")


@pytest.mark.parametrize("count", [".inf", "1e400", "-1", ".nan"])
def test_non_finite_outcome_counts_in_a_reference_are_refused(
    small_sweep: Path, reference: Path, tmp_path: Path, count: str
) -> None:
    text = reference.read_text()
    path = tmp_path / "ref.yaml"
    path.write_text(re.sub(r"outcomes: \{(\w+): \d+", rf"outcomes: {{\1: {count}", text, count=1))
    assert path.read_text() != text
    result = invoke_wide("compare", str(path), str(small_sweep))
    assert result.exit_code == 2, result.output
    assert "outcomes" in result.output


# ---- text that looks like a number round-trips: quoted where r2bench would read a number ------


@pytest.mark.parametrize("name", ["1e3", "2E-5", "+1e10", "1000", "0x10", "true", "null", "a1e3"])
def test_a_scenario_named_like_a_number_matches_its_own_written_reference(
    tmp_path: Path, name: str
) -> None:
    """Before: a scenario named `1e3` was written unquoted and read back as 1000, so compare
    found no reference cell for it."""
    from r2bench.compare.reference import (
        Bound,
        RefCell,
        Reference,
        RefSeries,
        load_reference,
        reference_keyed,
        reference_yaml,
    )
    from r2bench.compare.samples import make_key

    key = {"collective": "all_reduce", "scenario": name, "size_bytes": 1024}
    ref = Reference(
        series_columns=["collective", "scenario"],
        cells=[RefCell(key=key, metrics={"busbw_gbps": Bound(value=1.0)}, n=2)],
        series=[RefSeries(key={"collective": "all_reduce", "scenario": name}, outcomes={"ok": 2})],
    )
    path = tmp_path / "ref.yaml"
    path.write_text(reference_yaml(ref))
    cells, series = reference_keyed(load_reference(path))
    assert make_key(key, ref.cell_keys()) in cells, path.read_text()
    assert make_key(key, ref.series_columns) in series


def test_a_reference_written_before_the_quoting_still_reads_its_text(tmp_path: Path) -> None:
    from r2bench.compare.reference import load_reference

    path = tmp_path / "old.yaml"
    path.write_text(
        "format: r2bench-reference/1\nseries_columns: [scenario]\n"
        "series:\n- {scenario: 1e3, outcomes: {ok: 1}}\n- {scenario: 1.5, outcomes: {ok: 1}}\n"
    )
    keys = [s.key["scenario"] for s in load_reference(path).series]
    assert keys == ["1e3", 1.5]
