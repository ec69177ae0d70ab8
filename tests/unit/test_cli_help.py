"""The command line reads as users of typer tools expect: examples, choices, order, metavars.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_cli_help.py (those with real processes).
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from r2bench.cli import COMMANDS, app, cli

RUNNER = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def _commands() -> list[list[str]]:
    top = cli()
    out = []
    for name in top.list_commands(None):
        sub = top.get_command(None, name)  # a group is imported when it is asked for
        if hasattr(sub, "commands"):
            out += [[name, inner] for inner in sub.commands]
        else:
            out.append([name])
    return out


def _command_lines(text: str) -> dict[str, list[str]]:
    """Each command of the Commands panel with its description's lines, as shown."""
    panel = text[text.index("─ Commands ") :]
    rows: dict[str, list[str]] = {}
    current = ""
    for line in panel.splitlines()[1:]:
        if not line.startswith("│"):
            break
        name, description = line[2:12].strip(), line[12:].rstrip(" │")
        if name:
            current = name
            rows[current] = []
        rows[current].append(description.strip())
    return rows


def test_commands_are_listed_in_workflow_order() -> None:
    assert cli().list_commands(None) == list(COMMANDS)
    text = RUNNER.invoke(app, ["--help"], env=ENV).output
    positions = [text.index(f"│ {name} ") for name in COMMANDS]
    assert positions == sorted(positions)


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_command_help_has_an_example(command: list[str]) -> None:
    result = RUNNER.invoke(app, [*command, "--help"], env=ENV)
    assert result.exit_code == 0, result.output
    example = re.search(r"Example: (r2bench .+)", result.output)
    assert example, result.output
    assert example[1].split()[1] == command[0]


def test_flags_show_no_type_and_values_have_readable_names() -> None:
    for command in _commands():
        node = cli()
        for part in command:
            node = node.get_command(None, part)
        for param in node.params:
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                assert param.metavar == "", (command, param.name)
            elif param.param_type_name == "option":
                assert param.metavar is None or not param.metavar.startswith("<"), param.name


def test_testbed_kind_is_a_fixed_choice() -> None:
    result = RUNNER.invoke(app, ["testbed", "up", "cloud"], env=ENV)
    assert result.exit_code == 2
    assert "virtual" in result.output
    help_text = RUNNER.invoke(app, ["testbed", "up", "--help"], env=ENV).output
    assert "<virtual>" in help_text


def test_report_format_is_a_fixed_choice() -> None:
    result = RUNNER.invoke(app, ["report", "x", "--format", "gif"], env=ENV)
    assert result.exit_code == 2


def test_every_command_is_described_by_one_whole_sentence_at_80_columns() -> None:
    """`r2bench --help` shows the first paragraph of each command's help with its own line
    breaks: a summary must be one short sentence, or the list breaks mid-sentence."""
    text = RUNNER.invoke(app, ["--help"], env={**ENV, "COLUMNS": "80"}).output
    rows = _command_lines(text)
    assert list(rows) == list(COMMANDS)
    for name, lines in rows.items():
        assert len(lines) == 1, f"{name}: description broken over lines: {lines}"
        sentence = lines[0]
        assert sentence[:1].isupper() and sentence.endswith("."), f"{name}: {sentence!r}"
        own = RUNNER.invoke(app, [name, "--help"], env={**ENV, "COLUMNS": "80"}).output
        assert sentence.rstrip(".") in " ".join(own.split()) or name == "figures", name


def test_a_mistyped_command_is_answered_with_the_close_names() -> None:
    """Every command of the table is offered, loaded or not (typer offers only loaded ones)."""
    result = RUNNER.invoke(app, ["swep"], env=ENV)
    assert result.exit_code == 2
    assert "No such command 'swep'. Did you mean 'sweep', 'setup'?" in result.output
