"""No command ends in a traceback on bad paths and folders: one line, exit 2.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_cli_errors.py (its pure tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import r2bench
from r2bench.errors import ExitCode
from tests.support import paths
from tests.support.captures import DATA

ROOT = paths.REPO


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    code = "from r2bench.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def _corpus(tmp: Path) -> list[tuple[str, ...]]:
    empty = tmp / "empty-sweep"
    empty.mkdir()
    afile = tmp / "a-file.txt"
    afile.write_text("x\n")
    logs = str(DATA / "v2.18.5")
    return [
        ("parse", "/nonexistent/x.txt"),
        ("parse", str(tmp)),
        ("import", "/nonexistent"),
        ("import", str(afile)),
        ("import", logs, "--sweep", "a/b", "--results", str(tmp / "r")),
        ("import", logs, "--results", "/proc/nope"),
        ("import", logs, "--results", str(afile)),
        ("report", "/nonexistent"),
        ("report", str(empty)),
        ("report", str(afile)),
        ("report", str(empty), "--format", "gif"),
        ("schema", "--out", "/proc/x"),
        ("schema", "--out", str(afile)),
        ("plan", "/nonexistent.yaml", "-t", "/nonexistent.yaml"),
        ("doctor", "-t", "/nonexistent.yaml"),
        ("setup", "/nonexistent.yaml", "-t", "/nonexistent.yaml"),
        # No -t: the experiment is checked before the embedded testbed is brought up.
        ("sweep", "/nonexistent.yaml"),
        ("sweep", str(afile)),
        ("sweep", "/nonexistent.yaml", "-t", "/nonexistent.yaml"),
        ("heal", "-t", "/nonexistent.yaml"),
        ("inject", "link_down", "node1", "nic1", "-t", "/nonexistent.yaml"),
        ("revert", "link_down", "node1", "nic1", "-t", "/nonexistent.yaml"),
        ("compare", "/nonexistent", str(empty)),
        ("compare", str(empty), str(empty)),
        ("compare", str(afile), "--write-reference", str(tmp / "ref.yaml")),
        ("figures", "/nonexistent"),
        ("figures", str(empty)),
        ("cloudlab", "testbed", "/nonexistent.xml"),
        ("cloudlab", "testbed", str(afile)),
        ("testbed", "from-slurm", "-o", str(tmp / "tb.yaml")),
    ]


# ---- the terminal: hostile text, odd streams, odd locales -------------------------------------

QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
HOSTILE_VALUE = "\x1b]0;retitled\x07\x1b[31mred [/x] [bold]\u202eevil"


def _hostile_experiment(tmp: Path) -> Path:
    """The quickstart under a path holding `[/x]`, with escape sequences and markup in an env value."""
    folder = tmp / "[" / "x]"
    folder.mkdir(parents=True)
    path = folder / "q.yaml"
    text = QUICKSTART.read_text().replace(
        "NCCL_DEBUG: INFO", f"NCCL_DEBUG: {json.dumps(HOSTILE_VALUE)}"
    )
    path.write_text(text.replace("R2CC_MODE: [0, 1, 2]", "R2CC_MODE: [0, 1]"))
    return path


def _raw(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    code = "from r2bench.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
        cwd=cwd,
        timeout=120,
    )


# ---- one rule for what an error ends as ----------------------------------------------------------


def _run_raising(error: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`r2bench parse x` whose command raises `error` (a Python expression)."""
    code = (
        "import r2bench.commands.parse as parse\n"
        "from r2bench.errors import *\n"
        f"def boom(*args, **kwargs):\n    raise {error}\n"
        "parse.parse_command = boom\n"
        "from r2bench.cli import main; main()"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-c", code, *args, "parse", "x.log"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def test_no_traceback_on_bad_paths(tmp_path: Path) -> None:
    for args in _corpus(tmp_path):
        proc = _run(*args, cwd=tmp_path)
        both = proc.stdout + proc.stderr
        assert "Traceback" not in both, (args, both)
        assert proc.returncode == 2, (args, proc.returncode, both)
        assert both.strip(), args


def test_results_folder_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    proc = _run("import", str(DATA / "v2.18.5"), "--results", "/proc/nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot write the results folder /proc/nope" in proc.stderr
    assert "skipped" not in proc.stderr  # the inputs are not blamed


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    proc = _run("--debug", "schema", "--out", "/proc/x", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" in proc.stderr


@pytest.mark.parametrize("flag", ["--version"])
def test_version_flag(flag: str, tmp_path: Path) -> None:
    proc = _run(flag, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("r2bench ")


@pytest.mark.parametrize("view", [[], ["--commands"]])
def test_escape_sequences_and_markup_in_values_are_shown_escaped(
    tmp_path: Path, view: list[str]
) -> None:
    path = _hostile_experiment(tmp_path)
    proc = _raw("plan", str(path), "-t", str(VIRTUAL), *view, cwd=tmp_path, COLUMNS="300")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    if view:  # the value is the same in every run: only the commands show it
        assert "\\e]0;retitled" in out and "[/x]" in out and "\\u202e" in out


def test_a_markup_like_path_in_an_error_never_crashes(tmp_path: Path) -> None:
    path = _hostile_experiment(tmp_path)
    path.write_text(path.read_text() + "bogus: [/x]\n")
    proc = _raw(
        "plan", str(path), "-t", str(VIRTUAL), "--script", str(path.parent / "s"), cwd=tmp_path
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err
    assert f"{path}:" in err and "unknown key 'bogus'" in err


@pytest.mark.parametrize(
    "env",
    [
        {"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"},
        {"COLUMNS": "0"},
        {"COLUMNS": "-5", "LINES": "0"},
        {"COLUMNS": "x"},
    ],
    ids=["ascii-locale", "columns-0", "columns-negative", "columns-text"],
)
def test_odd_terminals_still_get_the_plan(tmp_path: Path, env: dict[str, str]) -> None:
    path = _hostile_experiment(tmp_path)
    proc = _raw("plan", str(path), "-t", str(VIRTUAL), cwd=tmp_path, **env)
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert b"quickstart on example: 8 runs" in proc.stdout, proc.stdout[:400]


def test_a_closed_stdout_is_an_error_not_silent_success(tmp_path: Path) -> None:
    path = _hostile_experiment(tmp_path)
    code = "import os; os.close(1); from r2bench.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "plan", str(path), "-t", str(VIRTUAL)],
        capture_output=False,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert proc.returncode != 0
    assert b"Traceback" not in proc.stderr and b"output" in proc.stderr


def test_a_closed_stdin_changes_nothing(tmp_path: Path) -> None:
    path = _hostile_experiment(tmp_path)
    code = "import os; os.close(0); from r2bench.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "plan", str(path), "-t", str(VIRTUAL)],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert b"8 runs" in proc.stdout


def test_an_unexpected_error_is_a_bug_with_its_traceback(tmp_path: Path) -> None:
    proc = _run_raising("ZeroDivisionError('oops')", cwd=tmp_path)
    assert proc.returncode == ExitCode.BUG == 70
    assert "Traceback" in proc.stderr and "ZeroDivisionError: oops" in proc.stderr
    assert "this is a bug in r2bench" in proc.stderr and r2bench.__version__ in proc.stderr


@pytest.mark.parametrize("error", ["ValueError('no')", "RuntimeError('no')", "OSError('no')"])
def test_a_plain_value_or_runtime_error_is_a_bug_too(error: str, tmp_path: Path) -> None:
    proc = _run_raising(error, cwd=tmp_path)
    assert proc.returncode == 70 and "Traceback" in proc.stderr


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ("InputError('bad value in x.yaml')", 2),
        ("TestbedError('namespace gone', 1)", 1),
        ("PermissionError(13, 'Permission denied', '/root/x')", 2),
        ("FileNotFoundError(2, 'No such file or directory', '/nope')", 2),
    ],
)
def test_an_expected_error_is_one_line_and_its_exit_code(
    error: str, code: int, tmp_path: Path
) -> None:
    if error.startswith("TestbedError"):
        error = "__import__('r2bench.testbeds.virtual.teardown').testbeds.virtual.teardown." + error
    proc = _run_raising(error, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[0].startswith("r2bench: error: ")


def test_debug_shows_the_traceback_of_an_expected_error_too(tmp_path: Path) -> None:
    proc = _run_raising("InputError('bad value')", "--debug", "-v", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" in proc.stderr
    assert "r2bench: error: bad value" in proc.stderr
