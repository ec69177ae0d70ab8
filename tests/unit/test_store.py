"""Run store: atomic files, COMPLETE last, resume, incomplete runs kept; provenance.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_store.py (those with real processes).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from r2bench import safeio
from r2bench.analysis.importer import import_dir
from r2bench.parse.library import nccl_version_text
from r2bench.plan.runspec import RunSpec
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.runfolder.provenance import redact_env
from r2bench.tables.build import INVALID, build_tables
from r2bench.testbeds.yamlio import write_text_atomic
from tests.support import paths
from tests.support.captures import top_level_copy
from tests.support.sample_sweep import SampleConfig, write_sample_sweep
from tests.support.store import ok_end, spec

DATA = paths.DATA / "nccl-tests"


def _set_format(run_dir: Path, value: object) -> dict[str, object]:
    """Rewrite a run's spec.json with `format` set to `value` (removed for None)."""
    data = json.loads((run_dir / runformat.SPEC).read_text())
    data.pop("format", None)
    if value is not None:
        data["format"] = value
    (run_dir / runformat.SPEC).write_text(json.dumps(data))
    return data


def test_files_are_written_through_a_temporary_and_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "outcome.json"
    target.write_text("old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        safeio.atomic_write(target, "new")
    assert target.read_text() == "old"  # never half-written
    assert os.listdir(tmp_path) == ["outcome.json"]  # the temporary is cleaned up


def test_files_get_normal_permissions(tmp_path: Path) -> None:
    safeio.atomic_write(tmp_path / "a.txt", "x")
    mode = stat.S_IMODE((tmp_path / "a.txt").stat().st_mode)
    umask = os.umask(0o022)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_a_file_written_with_a_mode_gets_it(tmp_path: Path) -> None:
    write_text_atomic(tmp_path / "testbed.yaml", "nodes: []\n")
    assert stat.S_IMODE((tmp_path / "testbed.yaml").stat().st_mode) == 0o600
    assert (tmp_path / "testbed.yaml").read_text() == "nodes: []\n"


def test_complete_is_the_last_file_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    real = st.atomic_write

    def recording(path: Path, data: str | bytes) -> None:
        order.append(path.relative_to(tmp_path).as_posix())
        real(path, data)

    monkeypatch.setattr(st, "atomic_write", recording)
    cfg = SampleConfig(modes=("1",), scenarios=("nic_down",), repeats=2, sizes=4)
    write_sample_sweep(tmp_path, DATA, cfg)
    by_run: dict[str, list[str]] = {}
    for name in order:  # <sweep>/<run-id>/<file>
        _, run, rest = name.split("/", 2)
        by_run.setdefault(run, []).append(rest)
    assert len(by_run) == 2
    for files in by_run.values():
        assert files[-1] == "COMPLETE" and files.count("COMPLETE") == 1
        assert {"spec.json", "provenance.json", "outcome.json", "faults.jsonl"} <= set(files)


def test_resume_skips_complete_and_moves_incomplete_aside(tmp_path: Path) -> None:
    store = st.RunStore(tmp_path, "sweep")
    s = spec()
    crashed = store.start(s)
    crashed.write_stdout("half a run")  # controller died here: no COMPLETE
    assert not store.is_complete(s.run_id)
    assert store.incomplete_runs() == [crashed.path]

    again = store.start(s)  # the re-run
    aside = tmp_path / "sweep" / f"{s.run_id}.incomplete-1"
    assert (aside / "stdout.txt").read_text() == "half a run"
    assert not (again.path / "stdout.txt").exists()
    third = store.start(s)  # and a second crash is kept too
    assert (tmp_path / "sweep" / f"{s.run_id}.incomplete-2").is_dir()
    third.write_outcome(ok_end())
    third.mark_complete()

    with pytest.raises(FileExistsError):
        store.create(s.run_id)
    assert list(store.complete_runs()) == [s.run_id]
    assert sorted(p.name for p in store.incomplete_runs()) == [
        f"{s.run_id}.incomplete-1",
        f"{s.run_id}.incomplete-2",
    ]
    assert all(st.is_moved_aside(p.name) for p in store.incomplete_runs())
    records = list(store.records(include_incomplete=True))
    assert [r.complete for r in records] == [True, False, False]


def test_unreadable_parts_load_as_empty(tmp_path: Path) -> None:
    store = st.RunStore(tmp_path, "sweep")
    folder = store.create("r1")
    (folder.path / "spec.json").write_text("{not json")
    (folder.path / "outcome.json").write_bytes(b"\x00\xff")
    (folder.path / "faults.jsonl").write_text('{"action": "inject"}\nnonsense\n')
    rec = store.load("r1")
    assert (rec.spec, rec.end, rec.faults, rec.complete) == (runmodel.SpecFields(), None, [], False)


def test_run_folders_carry_the_format_they_were_written_in(tmp_path: Path) -> None:
    store = st.RunStore(tmp_path, "sweep")
    folder = store.start(spec())
    written = json.loads((folder.path / runformat.SPEC).read_text())
    assert written["format"] == runformat.RUN_FORMAT == 1
    rec = store.load(folder.run_id)
    assert rec.problems == () and rec.spec.model_dump() == written


def test_imported_runs_carry_the_format_too(tmp_path: Path) -> None:
    report = import_dir(top_level_copy(tmp_path / "captured"), tmp_path / "results", "imp")
    runs = [p for p in report.sweep_dir.iterdir() if (p / runformat.SPEC).is_file()]
    assert runs
    for run in runs:
        assert json.loads((run / runformat.SPEC).read_text())["format"] == runformat.RUN_FORMAT


@pytest.mark.parametrize("value", [None, 0])
def test_folders_written_before_the_format_read_as_format_0(tmp_path: Path, value: object) -> None:
    store = st.RunStore(tmp_path, "sweep")
    folder = store.start(spec())
    data = _set_format(folder.path, value)
    rec = store.load(folder.run_id)
    assert rec.problems == () and rec.spec.model_dump() == data
    assert runformat.run_format(rec.spec.model_dump()) == 0


@pytest.mark.parametrize(
    ("value", "shown"), [(99, "99"), ("x", "'x'"), (True, "True"), (-1, "-1"), (1.0, "1.0")]
)
def test_a_format_this_r2bench_does_not_know_is_a_problem_of_that_run(
    tmp_path: Path, value: object, shown: str
) -> None:
    cfg = SampleConfig(modes=("1",), scenarios=("none",), repeats=3, sizes=3)
    store = write_sample_sweep(tmp_path, DATA, cfg)
    newer, *others = sorted(store.run_dirs())
    _set_format(newer, value)

    rec = runmodel.load_run(newer)
    expected = f"{newer / runformat.SPEC}: format: {shown}"
    assert len(rec.problems) == 1 and rec.problems[0].startswith(expected), rec.problems
    assert "written by a newer r2bench; upgrade r2bench to read it" in rec.problems[0]
    assert (rec.spec, rec.provenance, rec.end, rec.faults) == (runmodel.SpecFields(), {}, None, [])

    tables = build_tables(store.sweep_dir, workers=1)
    runs = tables.runs.set_index("run_id")
    assert runs.loc[newer.name, "outcome"] == INVALID
    assert expected in runs.loc[newer.name, "reason"]
    assert any(expected in w for w in tables.warnings)
    for other in others:
        assert runs.loc[other.name, "outcome"] != INVALID and runs.loc[other.name, "complete"]
    assert set(tables.results["run_id"]) == {p.name for p in others}


@pytest.mark.parametrize("bad", ["../x", "a/../../b", "/etc/passwd", "", "a\nb"])
def test_node_files_cannot_leave_the_run_folder(tmp_path: Path, bad: str) -> None:
    folder = st.RunStore(tmp_path, "s").create("r1")
    with pytest.raises(ValueError):
        folder.write_node_file("node0", bad, "x")
    with pytest.raises(ValueError):
        folder.write_node_file(bad or "..", "f.txt", "x")


def test_run_ids_and_sweep_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        st.RunStore(tmp_path, "../up")
    with pytest.raises(ValueError):
        st.RunStore(tmp_path, "s").create("../r")


def test_redact_env_drops_secret_names() -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "AWS_SECRET_ACCESS_KEY": "a",
        "GITHUB_TOKEN": "b",
        "db_password": "c",
        "SSH_AUTH_KEY": "d",
        "MY_CREDENTIALS": "e",
        "R2CC_MODE": "1",
    }
    kept, dropped = redact_env(env)
    assert kept == {"NCCL_DEBUG": "INFO", "R2CC_MODE": "1"}
    assert sorted(dropped) == [
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "MY_CREDENTIALS",
        "SSH_AUTH_KEY",
        "db_password",
    ]


def test_nccl_version_text() -> None:
    assert nccl_version_text(22803) == "2.28.3"
    assert nccl_version_text(2708) == "2.7.8"
    assert nccl_version_text(None) is None


def test_the_spec_read_back_is_the_run_spec_written() -> None:
    """spec.json is read back typed: every field the readers use is a RunSpec field, and a
    RunSpec written comes back with the same values."""
    assert set(runmodel.SpecFields.model_fields) <= set(RunSpec.model_fields) | {"run_id"}
    s = spec()
    back = runmodel.SpecFields.model_validate(json.loads(s.model_dump_json()))
    assert back.run_id == s.run_id and back.collective == s.collective
    assert back.nodes == list(s.nodes) and back.env == s.env and back.repeat == s.repeat
    assert back.library is not None and back.library.recipe == s.library.recipe
