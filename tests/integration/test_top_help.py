"""`r2bench --help` is printed from the command table with rich alone (`r2bench.tophelp`): it
must be, byte for byte, the help typer's rich formatter prints for the whole command line, at
every width and with or without colours, and must import neither typer nor any command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import paths

FAST = 'import sys; sys.argv[0] = "r2bench"; from r2bench.entry import main; main()'
FULL = 'import sys; sys.argv[0] = "r2bench"; from r2bench.cli import main; main()'


def _help(code: str, flag: str, width: int, colour: bool) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(COLUMNS=str(width), PYTHONPATH=str(paths.REPO))
    if colour:
        env["FORCE_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-c", code, flag], capture_output=True, env=env, timeout=60, check=False
    )


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("width", [40, 80, 100, 200])
def test_the_quick_help_is_the_rich_help_byte_for_byte(width: int, colour: bool) -> None:
    full = _help(FULL, "--help", width, colour)
    assert full.returncode == 0, full.stderr
    for flag in ("--help", "-h"):
        fast = _help(FAST, flag, width, colour)
        assert fast.returncode == 0, fast.stderr
        assert fast.stdout == full.stdout, (flag, fast.stdout.decode(), full.stdout.decode())
    assert b"compare" in full.stdout and (b"\x1b[" in full.stdout) == colour


def test_the_quick_help_imports_no_typer_click_or_command() -> None:
    code = (
        "import sys; sys.argv[0:] = ['r2bench', '--help']\n"
        "from r2bench.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'typer', 'click', 'r2bench.cli'} & set(sys.modules)\n"
        "heavy |= {m for m in sys.modules if m.startswith('r2bench.commands.')}\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_a_closed_standard_output_is_refused_in_one_line_as_by_the_command_line() -> None:
    code = f"import os; os.close(1); {FAST}"
    proc = subprocess.run(
        [sys.executable, "-c", code, "--help"],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(paths.REPO)},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("r2bench: error: standard output is closed"), proc.stderr
    assert "Traceback" not in proc.stderr
