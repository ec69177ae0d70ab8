"""No traceback (exit 70) on a plain bad value, through the commands a user runs: a number out
of range costs its row (warned, located), a write the machine refuses is one line naming the
file, a config value that cannot be written out is refused where it is read.

Its pure tests (the readers themselves): tests/unit/test_bad_values.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.errors import ExitCode
from tests.support.captures import DATA
from tests.support.cli_runner import invoke_wide

JSON_TWIN = DATA / "v2.19.6" / "all_gather_perf.g2.J.json"
TEXT_LOG = DATA / "v2.19.6" / "all_reduce_perf.g2.c1.txt"
INFO_LOG = DATA / "v2.19.6" / "all_reduce_perf.np2.info.txt"
HUGE = "100000000000000000000000"


def _edited(source: Path, folder: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text, f"{source.name} no longer holds {old!r}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    target.write_text(text.replace(old, new, 1))
    return target


@pytest.mark.parametrize("count", ["1e400", "Infinity", "-Infinity", "NaN"])
def test_parse_of_a_json_count_that_is_not_finite_warns_and_reads_the_rest(
    tmp_path: Path, count: str
) -> None:
    bad = _edited(JSON_TWIN, tmp_path, '"count":8,', f'"count":{count},')
    ran = invoke_wide("parse", str(bad), "--json")
    assert ran.exit_code == ExitCode.OK, ran.output
    assert "results[1] malformed: count" in ran.output


CASES = {
    "json size 2^64": (JSON_TWIN, '"size":64,', f'"size":{2**64},'),
    "json #wrong 10^23": (JSON_TWIN, '"nwrong":0.0}', f'"nwrong":{HUGE}}}'),
    "json pid 10^23": (JSON_TWIN, '"pid":11191', f'"pid":{HUGE}'),
    "text #wrong 10^23": (TEXT_LOG, "0.00       0    19.73", f"0.00 {HUGE}    19.73"),
    "text size 2^64": (TEXT_LOG, "          64            16", f"{2**64} 16"),
    "NCCL line pid 10^23": (
        INFO_LOG,
        "vm:11166:11166 [0] NCCL INFO NCCL_SOCKET",
        f"vm:{HUGE}:11166 [0] NCCL WARN NCCL_SOCKET",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_import_and_every_later_report_survive_a_number_out_of_range(
    tmp_path: Path, case: str
) -> None:
    source, old, new = CASES[case]
    _edited(source, tmp_path / "logs", old, new)
    results = tmp_path / "results"
    imported = invoke_wide(
        "import", str(tmp_path / "logs"), "--sweep", "s", "--results", str(results)
    )
    assert imported.exit_code == ExitCode.OK, imported.output
    for _ in range(2):  # the second report reads the tables the first one left
        reported = invoke_wide("report", str(results / "s"), "--out", str(tmp_path / "report.html"))
        assert reported.exit_code == ExitCode.OK, reported.output
