"""Each command's typical failure exits with the code its `--help` documents, through `main`
(the one place that turns errors into exit codes). The failures that need a node use a
testbed whose nodes do not answer (ssh to a closed port on loopback): a lost node exits 1
from every command that talks to nodes. Bad paths and files (exit 2) are in test_cli_errors.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_exit_codes.py (its pure tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from r2bench.errors import ExitCode
from tests.integration.test_cli_errors import _run as _r2bench
from tests.support import paths

ROOT = paths.REPO
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
LOST = "{lost}"


@dataclass(frozen=True)
class Failure:
    """A command line that fails, the exit code expected, and where its help says so."""

    args: tuple[str, ...]
    code: int
    documented: str
    """Words of `r2bench <command> --help` that give this exit code (whitespace-normalized)."""


FAILURES = [
    Failure(("doctor", "-t", LOST), 1, "1 a check failed"),
    Failure(("doctor", "--discover", "-t", LOST), 1, "1 a node could not be asked"),
    Failure(
        ("setup", str(QUICKSTART), "-t", LOST, "--log-dir", "{tmp}/logs"),
        1,
        "1 a build failed on some node",
    ),
    Failure(
        ("sweep", str(QUICKSTART), "-t", LOST, "--results", "{tmp}/results"),
        1,
        "1 some run could not be carried out (doctor or setup failed, node lost",
    ),
    Failure(
        ("sweep", str(QUICKSTART), "-t", LOST, "--skip-doctor", "--skip-setup"),
        1,
        "node lost",
    ),
    Failure(("sweep", str(QUICKSTART), "--rerun", "all"), 2, "2 bad input"),
    Failure(("heal", "-t", LOST), 1, "1 otherwise"),
    Failure(("inject", "link_down", "node1", "nic1", "-t", LOST), 1, ""),
    Failure(("revert", "link_down", "node1", "nic1", "-t", LOST), 1, ""),
    Failure(("parse", "{tmp}/notes.txt"), 1, "1 an input is not nccl-tests output"),
    Failure(("parse", "{tmp}/missing.txt"), 2, "2 a file could not be read"),
    Failure(("compare", "{tmp}", "{tmp}"), 2, "2 could not compare"),
    Failure(("figures", "{tmp}"), 2, "2 a sweep folder does not exist or holds no run"),
]


def _lost_testbed(tmp: Path) -> Path:
    """Two nodes of four data NICs each, whose ssh port (1, on loopback) is closed."""
    nodes = []
    for i in range(2):
        nics = "".join(
            f"      - {{name: nic{j}, kind: eth, netdev: nic{j}, address: 198.18.{j + 1}.{10 + i}}}\n"
            for j in range(4)
        )
        nodes.append(
            f"  - name: node{i}\n    address: 127.0.0.{i + 1}\n"
            f"    ssh: {{user: root, port: 1, key: {tmp}/nokey, known_hosts: {tmp}/known}}\n"
            f"    sudo: false\n    nics:\n"
            f"      - {{name: mgmt0, kind: eth, netdev: lo, address: 127.0.0.{i + 1}, "
            f"management: true}}\n{nics}"
        )
    path = tmp / "lost.yaml"
    path.write_text(
        "name: lost\nkind: virtual\nnodes:\n" + "".join(nodes) + "launcher:\n  kind: mpirun\n"
        "  allow_run_as_root: true\n  bootstrap_interface: mgmt0\n"
        f"paths:\n  work_dir: {tmp}/work\n"
    )
    return path


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: " ".join(f.args[:2]))
def test_a_typical_failure_exits_with_the_documented_code(failure: Failure, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("shopping list\n")
    lost = _lost_testbed(tmp_path)
    args = [arg.format(lost=lost, tmp=tmp_path) for arg in failure.args]
    proc = _r2bench(*args, cwd=tmp_path)
    assert proc.returncode == failure.code, (args, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    help_text = " ".join(_r2bench(failure.args[0], "--help", cwd=tmp_path).stdout.split())
    # The rich help draws a frame only around options; the docstring is plain text.
    assert failure.documented in help_text, help_text[:1500]


def test_every_documented_exit_code_is_a_known_one(tmp_path: Path) -> None:
    """What `Exit codes:` texts promise is among the codes of r2bench.errors.ExitCode."""
    codes = {int(code) for code in ExitCode}
    for command in ("plan", "setup", "doctor", "sweep", "parse", "import", "report", "compare"):
        text = " ".join(_r2bench(command, "--help", cwd=tmp_path).stdout.split())
        promised = re.search(r"Exit codes: (.*?)(?: Example|$)", text)
        assert promised, command
        numbers = {int(n) for n in re.findall(r"(?:^|[,;:] )(\d+) ", promised[1])}
        assert numbers and numbers <= codes, (command, numbers)
