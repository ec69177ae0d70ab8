"""No traceback (exit 70) on a plain bad value, through the commands a user runs: a number out
of range costs its row (warned, located), a write the machine refuses is one line naming the
file, a config value that cannot be written out is refused where it is read.

Its pure tests (the readers themselves): tests/unit/test_bad_values.py."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.errors import ExitCode
from tests.support import paths
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


# ---- writes the machine refuses: one line naming the file, never "a bug" ----------------------

ROOT = paths.REPO
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
MANIFEST = paths.DATA / "cloudlab" / "real-utah-2024-m510.xml"
FILE_SIZE_LIMIT = 16
"""Bytes a process under test may write to one file: every output is larger (EFBIG)."""


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def _run_file_size_limited(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`r2bench ARGS` in a process that may write only FILE_SIZE_LIMIT bytes to a file (Python
    ignores SIGXFSZ, so a longer write fails with EFBIG, "File too large")."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="250", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-c", "from r2bench.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        preexec_fn=_limit_file_size,
    )


def _imported_sweep(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(TEXT_LOG, logs)
    ran = invoke_wide("import", str(logs), "--sweep", "s", "--results", str(tmp_path / "r"))
    assert ran.exit_code == ExitCode.OK, ran.output
    return tmp_path / "r" / "s"


def _writers(tmp_path: Path) -> dict[str, tuple[list[str], Path]]:
    """Command -> (its arguments, the file it writes)."""
    out = tmp_path / "[/x]"  # markup in the path must print as itself
    logs = tmp_path / "logs-in"
    logs.mkdir()
    shutil.copy(TEXT_LOG, logs)
    return {
        "schema --out": (["schema", "--out", str(out)], out / "testbed.schema.json"),
        "plan --script": (
            ["plan", str(QUICKSTART), "-t", str(VIRTUAL), "--script", str(out)],
            out,
        ),
        "cloudlab testbed -o": (
            ["cloudlab", "testbed", str(MANIFEST), "-o", str(out / "t.yaml")],
            out / "t.yaml",
        ),
        "import": (["import", str(logs), "--sweep", "s", "--results", str(out)], out),
    }


@pytest.mark.parametrize(
    "command",
    ["schema --out", "plan --script", "cloudlab testbed -o", "import", "compare --markdown"],
)
def test_a_write_refused_by_the_machine_is_one_line_naming_the_file(
    tmp_path: Path, command: str
) -> None:
    if command == "compare --markdown":
        sweep = _imported_sweep(tmp_path)
        args, target = (
            ["compare", str(sweep), str(sweep), "--markdown", str(tmp_path / "[/x].md")],
            tmp_path / "[/x].md",
        )
    else:
        args, target = _writers(tmp_path)[command]
    proc = _run_file_size_limited(*args, cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "bug in r2bench" not in proc.stderr
    assert "File too large (EFBIG)" in proc.stderr, proc.stderr
    assert str(tmp_path / "[/x]") in proc.stderr
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*")), "a temporary file left"
    assert not (target.is_file() and target.stat().st_size > 0), "half a file left"


# ---- JSON nested too deeply: the file refused, named; never a RecursionError -------------------


def test_a_json_twin_nested_too_deeply_is_named_by_import_and_refused_by_parse(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "deep.json").write_text('{"results":' + "[" * 100_000 + "]" * 100_000 + "}")
    twin = JSON_TWIN.with_suffix(".txt").read_text()
    (logs / "deep.txt").write_text(
        twin.replace("/root/out/v2.19.6/all_gather_perf.g2.J.json", "deep.json")
    )
    shutil.copy(TEXT_LOG, logs)  # a good log beside them is still imported
    ran = invoke_wide("import", str(logs), "--sweep", "s", "--results", str(tmp_path / "r"))
    assert ran.exit_code == ExitCode.OK, ran.output
    # the text is its own run (imported alone); the twin it names is listed as skipped
    assert "2 imported" in ran.output and "1 skipped" in ran.output, ran.output
    assert "deep.json: the -J file of this output is nested too deeply to read" in ran.output
    parsed = invoke_wide("parse", str(logs / "deep.json"))
    assert parsed.exit_code == ExitCode.USAGE
    assert f"cannot read {logs / 'deep.json'}: nested too deeply" in parsed.output


# ---- a value no UTF-8 text can carry: refused where the config is read ------------------------


@pytest.mark.parametrize("view", [[], ["--json"], ["--script", "scripts"]])
def test_a_lone_surrogate_in_an_experiment_env_is_refused_by_every_plan_view(
    tmp_path: Path, view: list[str]
) -> None:
    experiment = tmp_path / "exp.yaml"
    text = QUICKSTART.read_text()
    assert "\n  NCCL_DEBUG: INFO\n" in text
    experiment.write_text(
        text.replace("\n  NCCL_DEBUG: INFO\n", '\n  NCCL_DEBUG: INFO\n  MY_VAR: "a\\ud800b"\n')
    )
    line = experiment.read_text().splitlines().index('  MY_VAR: "a\\ud800b"') + 1
    ran = invoke_wide(
        "plan",
        str(experiment),
        "-t",
        str(VIRTUAL),
        *[str(tmp_path / v) if v == "scripts" else v for v in view],
    )
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert f"{experiment}:{line}:11: env.MY_VAR: holds a lone surrogate" in ran.output
    assert not (tmp_path / "scripts").exists()


# ---- markup in an output path is printed as itself ---------------------------------------------


def test_markup_in_an_output_path_is_printed_as_written(tmp_path: Path) -> None:
    out = tmp_path / "[/x]" / "[bold]"
    schema = invoke_wide("schema", "--out", str(out))
    assert schema.exit_code == ExitCode.OK, schema.output
    assert f"wrote {out / 'testbed.schema.json'}" in schema.output
    sweep = _imported_sweep(tmp_path)
    reference = tmp_path / "[/x].yaml"
    wrote = invoke_wide("compare", str(sweep), "--write-reference", str(reference))
    assert wrote.exit_code == ExitCode.OK, wrote.output
    assert f"wrote {reference}:" in wrote.output and reference.is_file()


HOT_REPAIR_LOG = paths.DATA / "r7525" / "logs" / "02.hot_repair_to_r2cc_allreduce.log"


@pytest.mark.parametrize(
    ("old", "new", "line", "field"),
    [
        ("bytes=4294967296 ", f"bytes={HUGE} ", 13, "bytes"),
        (
            "Iter 1/10 END: OK (elapsed 2257 ms)",
            f"Iter 1/10 END: OK (elapsed {HUGE} ms)",
            40,
            "elapsed ms",
        ),
    ],
)
def test_an_artifact_log_number_beyond_int64_is_refused_at_its_line(
    tmp_path: Path, old: str, new: str, line: int, field: str
) -> None:
    log = _edited(HOT_REPAIR_LOG, tmp_path / "logs", old, new)
    ran = invoke_wide(
        "import", str(tmp_path / "logs"), "--sweep", "s", "--results", str(tmp_path / "r")
    )
    assert ran.exit_code == ExitCode.OK, ran.output
    assert f"{log}:{line}: {field} '{HUGE}' is out of range" in ran.output
    parsed = invoke_wide("parse", str(log))
    assert parsed.exit_code == ExitCode.USAGE and f"{log}:{line}:" in parsed.output


def test_a_json_twin_with_lone_surrogates_is_imported_as_the_file_spells_them(
    tmp_path: Path,
) -> None:
    text = JSON_TWIN.read_text()
    for old, new in (
        ('"NCCL_NVLS_ENABLE=0"', r'"NCCL_NVLS_ENABLE=a\ud800b"'),
        ('"hostname":"vm"', r'"hostname":"v\udc00m"'),
    ):
        assert old in text
        text = text.replace(old, new)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "surrogates.json").write_text(text)
    results = tmp_path / "r"
    ran = invoke_wide("import", str(logs), "--sweep", "s", "--results", str(results))
    assert ran.exit_code == ExitCode.OK and "1 imported" in ran.output, ran.output
    (run,) = [p for p in (results / "s").iterdir() if p.is_dir() and p.name != "tables"]
    assert "a\\\\ud800b" in (run / "provenance.json").read_text()
    reported = invoke_wide("report", str(results / "s"), "--out", str(tmp_path / "r.html"))
    assert reported.exit_code == ExitCode.OK, reported.output


def test_an_import_cut_short_by_a_refused_write_leaves_no_half_run(tmp_path: Path) -> None:
    args, out = _writers(tmp_path)["import"]
    proc = _run_file_size_limited(*args, cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    left = [p.name for p in (out / "s").iterdir()] if (out / "s").is_dir() else []
    assert left == [], f"a half-written run would count as incomplete in every report: {left}"


@pytest.mark.parametrize("record", ["spec.json", "outcome.json"])
def test_a_run_record_edited_beyond_int64_skips_its_run_and_the_report_goes_on(
    tmp_path: Path, record: str
) -> None:
    sweep = _imported_sweep(tmp_path)
    (run,) = [p for p in sweep.iterdir() if p.is_dir() and p.name != "tables"]
    text = (run / record).read_text()
    edited = text.replace('"repeat": 0', f'"repeat": {HUGE}')
    edited = edited.replace('"exit_code": null', f'"exit_code": {HUGE}')
    assert edited != text
    (run / record).write_text(edited)
    reported = invoke_wide("report", str(sweep), "--out", str(tmp_path / "r.html"))
    assert reported.exit_code != ExitCode.BUG, reported.output
    assert f"{run / record}: not valid JSON for a run record" in reported.output
