"""Real outputs of three nccl-tests releases (2.13.13, 2.18.5, 2.19.6), each collective and
each outcome, read right (tests/data/nccl-tests/<release>/README.md says how each was made)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from r2bench.analysis.importer import find_logs, import_dir
from r2bench.analysis.outcome import classify
from r2bench.commands.parse import parse_file
from r2bench.parse.models import OutcomeStatus
from r2bench.parse.nccltests.text import ends_complete, parse_text
from r2bench.runfolder.store import RunStore
from tests.support.captures import DATA, RELEASES

COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "alltoall", "sendrecv")


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_complete_runs_of_every_release_are_ok(release: str, collective: str) -> None:
    [(parsed, _, outcome)] = parse_file(DATA / release / f"{collective}_perf.g2.c1.txt")
    assert outcome.status is OutcomeStatus.OK, outcome.reason
    assert parsed.collective == collective
    # 2.13 prints no program name: the columns or the file name tell it, and say which
    old = release.startswith("v2.13")
    assert parsed.collective_from in (("columns", "file_name") if old else ("program_line",))
    assert len(parsed.rows) == 14 and parsed.avg_busbw_gbps and parsed.avg_busbw_gbps > 0
    assert parsed.nccl_tests_version == (None if old else release[1:])


def test_old_release_without_file_name_is_known_by_its_columns_when_they_tell() -> None:
    for collective, expected in (("broadcast", "broadcast"), ("reduce_scatter", "reduce_scatter")):
        text = (DATA / "v2.13.13" / f"{collective}_perf.g2.c1.txt").read_bytes()
        parsed = parse_text(text)
        assert (parsed.collective, parsed.collective_from) == (expected, "columns")
    ambiguous = parse_text((DATA / "v2.13.13" / "all_reduce_perf.g2.c1.txt").read_bytes())
    assert ambiguous.collective is None  # all_reduce and sendrecv print the same columns
    assert any("all_reduce or sendrecv" in w for w in ambiguous.warnings)


def test_old_release_cut_before_its_footer_is_incomplete() -> None:
    text = (DATA / "v2.13.13" / "all_reduce_perf.g2.c1.txt").read_text()
    cut = text[: text.index("# Out of bounds")]
    parsed = parse_text(cut, file_name="all_reduce_perf.txt")
    assert not ends_complete(parsed)
    # cut short, and nothing says it failed: not a crash nobody saw
    assert classify(None, parsed=parsed).status is OutcomeStatus.INCOMPLETE
    # a versioned release needs its concluded line, the footer alone is not enough
    new = (DATA / "v2.18.5" / "all_reduce_perf.g2.c1.txt").read_text()
    parsed = parse_text(new[: new.index("# Collective test concluded")])
    assert parsed.footer and not ends_complete(parsed)


@pytest.mark.parametrize("release", RELEASES)
def test_wrong_results_of_every_release(release: str) -> None:
    [(parsed, _, outcome)] = parse_file(DATA / release / "all_reduce_perf.g2.wrong.txt")
    assert outcome.status is OutcomeStatus.WRONG_RESULTS
    assert parsed.oob_failed and all(r.wrong == 2 for r in parsed.rows if r.size_bytes >= 8)


@pytest.mark.parametrize("release", RELEASES)
def test_segfault_names_signal_and_frame(release: str) -> None:
    [(_, _, outcome)] = parse_file(DATA / release / "all_reduce_perf.g2.segv.txt")
    assert outcome.status is OutcomeStatus.CRASHED
    assert "signal 11 (Segmentation fault) in ncclAllReduce (libshim.so)" in outcome.reason
    assert "(ranks 0, 1)" in outcome.reason  # one process drives both GPUs (-g 2)


def test_segfault_under_mpirun_names_the_rank() -> None:
    [(_, _, outcome)] = parse_file(DATA / "v2.18.5" / "all_reduce_perf.np2.segv.txt")
    assert outcome.status is OutcomeStatus.CRASHED and outcome.failed_host == "vm"
    assert outcome.reason.startswith("rank ") and "Segmentation fault" in outcome.reason


@pytest.mark.parametrize("release", ["v2.13.13", "v2.18.5"])
def test_timeout_glued_to_a_half_printed_row(release: str) -> None:
    [(_, _, outcome)] = parse_file(DATA / release / "all_reduce_perf.np2.hung.T5.txt")
    assert outcome.status is OutcomeStatus.TIMEOUT and "(5s, -T)" in outcome.reason


@pytest.mark.parametrize("release", ["v2.13.13", "v2.19.6"])
def test_mpirun_with_nccl_info_in_the_same_stream(release: str) -> None:
    [(parsed, events, outcome)] = parse_file(DATA / release / "all_reduce_perf.np2.info.txt")
    assert outcome.status is OutcomeStatus.OK and len(parsed.rows) == 8  # 4 sizes x 2
    versions = {e.details.get("version") for e in events if e.kind.value == "nccl_version"}
    assert any(v and v.startswith("2.28.9") for v in versions)


def test_multi_run_file_is_split() -> None:
    runs = parse_file(DATA / "v2.18.5" / "multi.loop.txt")
    assert [p.collective for p, _, _ in runs] == ["all_reduce"] * 3 + ["all_gather"]
    assert all(len(p.rows) == 6 and p.cycles == 1 for p, _, _ in runs)
    assert [round(p.avg_busbw_gbps or 0, 4) for p, _, _ in runs] == [
        78.4558,
        84.4187,
        79.6478,
        55.9863,
    ]
    assert runs[1][0].rows[0].line == 32  # line numbers stay those of the file


def _folder(tmp_path: Path, files: list[Path]) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    for f in files:
        shutil.copy2(f, logs / f.name)
    return logs


@pytest.mark.parametrize(
    ("release", "stem"), [("v2.18.5", "all_reduce_perf.g2.J"), ("v2.19.6", "all_gather_perf.g2.J")]
)
def test_json_twin_paired_by_its_writing_line(tmp_path: Path, release: str, stem: str) -> None:
    src = DATA / release
    logs = _folder(tmp_path, [src / f"{stem}.txt", src / f"{stem}.json"])
    (logs / f"{stem}.json").rename(logs / "renamed.json")  # stems differ now
    text = (logs / f"{stem}.txt").read_text()
    (logs / f"{stem}.txt").write_text(text.replace(f"{stem}.json", "renamed.json"))
    [logset] = find_logs(logs)
    assert logset.json is not None and logset.json.name == "renamed.json"
    report = import_dir(logs, tmp_path / "results", "twins")
    assert len(report.imported) == 1
    rec = RunStore(tmp_path / "results", "twins").load(report.imported[0][0])
    assert rec.provenance["library_basis"] == "NCCL version 2.28.9 printed, no R2CC log line"
    assert rec.spec.collective == stem.split("_perf")[0]


def test_file_name_with_a_prefix_still_names_the_collective(tmp_path: Path) -> None:
    """2.13 prints no program name, and all_reduce's columns fit sendrecv too: the file name
    decides, whatever a user put before the test's name."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy2(
        DATA / "v2.13.13" / "all_reduce_perf.g2.c1.txt", logs / "v213-all_reduce_perf.c1.txt"
    )
    shutil.copy2(DATA / "v2.13.13" / "all_gather_perf.g2.c1.txt", logs / "run2_all_gather_perf.txt")
    report = import_dir(logs, tmp_path / "results", "prefixed")
    store = RunStore(tmp_path / "results", "prefixed")
    named = sorted(store.load(run_id).spec.collective for run_id, _ in report.imported)
    assert named == ["all_gather", "all_reduce"]


def test_import_of_n_distinct_logs_yields_n_runs_twice(tmp_path: Path) -> None:
    """Same build, different collectives and sizes, plus a 4-run file: every run lands once."""
    files = [DATA / r / f"{c}_perf.g2.c1.txt" for r in RELEASES for c in COLLECTIVES]
    logs = _folder(tmp_path, [])
    for f in files:  # same names in every release folder: keep them apart
        (logs / f.parent.name).mkdir(exist_ok=True)
        shutil.copy2(f, logs / f.parent.name / f.name)
    shutil.copy2(DATA / "v2.18.5" / "multi.loop.txt", logs / "multi.loop.txt")
    # two byte-different files that reconstruct the same spec
    same = (logs / "v2.19.6" / "all_reduce_perf.g2.c1.txt").read_text()
    (logs / "copy.txt").write_text(
        same.replace("Avg bus bandwidth    : ", "Avg bus bandwidth    :  ")
    )
    (logs / "copy2.txt").write_text(same)
    expected = len(files) + 4 + 2
    results = tmp_path / "results"
    first = import_dir(logs, results, "mixed")
    assert len(first.imported) == expected and not first.already
    again = import_dir(logs, results, "mixed")
    assert not again.imported and len(again.already) == expected
    assert len(list(RunStore(results, "mixed").complete_runs())) == expected


@settings(max_examples=200, deadline=None)
@given(hs.text(alphabet=hs.characters(blacklist_categories=["Cs"]), max_size=400))
def test_random_text_is_not_nccl_tests(text: str) -> None:
    parsed = parse_text(text)
    status = classify(None, parsed=parsed).status
    assert status not in (OutcomeStatus.OK, OutcomeStatus.CRASHED)
    assert status is OutcomeStatus.NOT_NCCL_TESTS
