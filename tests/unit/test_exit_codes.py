"""Each command's typical failure exits with the code its `--help` documents, through `main`
(the one place that turns errors into exit codes). The failures that need a node use a
testbed whose nodes do not answer (ssh to a closed port on loopback): a lost node exits 1
from every command that talks to nodes. Bad paths and files (exit 2) are in test_cli_errors.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_exit_codes.py (those with real processes).
"""

from __future__ import annotations

from r2bench.compare.samples import CompareInputError
from r2bench.errors import ExitCode, InputError
from r2bench.nodes import NodeError
from r2bench.runfolder.runmodel import RecordError


def test_record_and_compare_errors_are_input_errors_and_still_value_errors() -> None:
    for error in (RecordError("run.json: bad"), CompareInputError("no sweep")):
        assert isinstance(error, InputError) and isinstance(error, ValueError)
        assert error.exit_code == ExitCode.USAGE == 2


def test_a_lost_node_exits_1_whichever_command_meets_it() -> None:
    error = NodeError("node0", "true", "ssh failed")
    assert error.exit_code == ExitCode.FAILED == 1
