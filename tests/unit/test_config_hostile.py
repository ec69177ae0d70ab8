"""Hostile config input: deep nesting, huge and non-finite numbers, YAML tags, and problems in
both files at once. Nothing may escape as a traceback; numbers that reach a node's command line
are finite, bounded and plain decimals.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_config_hostile.py (those with real processes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from r2bench.config.errors import ConfigError
from r2bench.config.source import MAX_DEPTH, parse_yaml
from r2bench.config.testbed import Nic
from r2bench.config.types import parse_size
from r2bench.faults.catalogue import FAULT_KINDS, format_seconds, injector_argv
from r2bench.plan.build import LEASE_GRACE_S, load_inputs, make_plan
from r2bench.plan.render import plan_json
from tests.support import paths
from tests.support.cli_runner import invoke_as_main
from tests.support.config_hostile import SWEEP_BOMB, assert_plain_numbers, nest, outcome

CORPUS = paths.CORPUS
TESTBED = CORPUS / "testbed.yaml"
PAPER = paths.REPO / "experiments" / "paper" / "one-nic-down.yaml"


LAUGHS = "".join(
    [f"l0: &l0 [{', '.join(['x'] * 10)}]\n"]
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9)]
)


def test_block_style_nesting_is_bounded_too() -> None:
    text = "".join("  " * i + "- \n" for i in range(MAX_DEPTH + 5)) + "  " * (MAX_DEPTH + 5) + "1\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "deep.yaml")
    (issue,) = info.value.issues
    assert "nested deeper than" in issue.message and issue.line is not None


def test_a_1kb_file_of_500_lists_is_refused_with_its_position() -> None:
    text = "name: x\nextra: " + "[" * 500 + "]" * 500 + "\n"
    assert len(text) < 1100
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "lists.yaml")
    (issue,) = info.value.issues
    assert issue.line == 2 and issue.column == 7 + MAX_DEPTH and issue.path == ("extra",)


# ---- tags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "!!python/tuple [all_reduce]",
        "!!python/object/apply:os.system [x]",
        "!!set {all_reduce}",
        "!!omap [a: 1]",
        "!custom {a: 1}",
    ],
)
def test_tags_on_collections_are_refused_not_dropped(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(f"name: x\ncollectives: {value}\n", "tags.yaml")
    (issue,) = info.value.issues
    assert issue.path == ("collectives",) and "tag" in issue.message and issue.line == 2


def test_plain_collections_with_explicit_standard_tags_still_load() -> None:
    doc = parse_yaml("a: !!seq [1]\nb: !!map {c: 2}\n", "ok.yaml")
    assert doc.data == {"a": [1], "b": {"c": 2}}


def test_infinite_deadline_is_refused_not_rendered_as_inf(tmp_path: Path) -> None:
    """Before: `deadline_s: .inf` passed and a fault without duration rendered `--lease-s inf`."""
    body = PAPER.read_text().replace("deadline_s: 900", "deadline_s: .inf")
    body = body.replace("        duration_s: 60\n", "")
    error = outcome(tmp_path, body)
    assert error is not None and "deadline_s" in str(error) and "finite" in str(error)


def test_large_leases_render_as_plain_decimals() -> None:
    """Before: 1e+06 (`%g`); the injector accepts only plain decimals."""
    assert format_seconds(1_000_030.0) == "1000030"
    assert format_seconds(90.0) == "90"
    assert format_seconds(0.25) == "0.25"
    assert format_seconds(1e-7) == "0.001"
    nic = Nic(name="eth1", kind="eth", netdev="eth1")
    argv = injector_argv(FAULT_KINDS["link_down"], "inject", nic, {}, "t", "/w", 1_000_030.0)
    assert argv[argv.index("--lease-s") + 1] == "1000030"
    with pytest.raises(ValueError):
        format_seconds(float("inf"))


def test_every_process_fault_sends_the_signal_its_catalogue_entry_names() -> None:
    kinds = [kind for kind in FAULT_KINDS.values() if not kind.targets_nic]
    assert {kind.name: kind.signal for kind in kinds} == {
        "process_stop": "STOP",
        "process_kill": "KILL",
    }
    for kind in kinds:
        argv = injector_argv(kind, "inject", None, {"rank": "1"}, "t", "/w", run_id="r1")
        assert argv[argv.index("--signal") + 1] == kind.signal
    assert all(kind.signal is None for kind in FAULT_KINDS.values() if kind.targets_nic)


def test_plan_json_has_numeric_deadlines_and_leases(tmp_path: Path) -> None:
    body = PAPER.read_text().replace("deadline_s: 900", "deadline_s: 604800")
    body = body.replace("        duration_s: 60\n", "")
    assert outcome(tmp_path, body) is None
    plan = make_plan(load_inputs(tmp_path / "hostile.yaml", TESTBED))
    assert_plain_numbers(plan)
    # the lease covers the whole deadline from the arm, plus the grace
    assert json.loads(plan_json(plan))["runs"][-1]["faults"][0]["lease_s"] == 604800 + LEASE_GRACE_S


# ---- both files, every problem at once -------------------------------------------------------


def test_cross_file_problems_come_with_per_file_ones(tmp_path: Path) -> None:
    """Before: a wrong type anywhere hid the fault on an unknown node until it was fixed."""
    body = PAPER.read_text().replace("repeats: 3", "repeats: three")
    body = body.replace("node: node1", "node: node7")
    error = outcome(tmp_path, body)
    assert error is not None
    paths = {issue.path for issue in error.issues}
    assert ("repeats",) in paths and ("scenarios", 0, "faults", 0, "node") in paths, str(error)


def test_testbed_and_experiment_problems_are_reported_together(tmp_path: Path) -> None:
    testbed = tmp_path / "tb.yaml"
    testbed.write_text(TESTBED.read_text().replace("gpus: 8", "gpus: many", 1))
    body = PAPER.read_text().replace("repeats: 3", "repeats: three")
    error = outcome(tmp_path, body, testbed)
    assert error is not None
    files = {issue.file for issue in error.issues}
    assert files == {str(testbed), str(tmp_path / "hostile.yaml")}, str(error)


def test_issues_are_in_file_order(tmp_path: Path) -> None:
    body = PAPER.read_text().replace("repeats: 3", "repeats: three")
    body = body.replace("node: node1", "node: node7").replace("iterations: 20", "iterations: x")
    error = outcome(tmp_path, body)
    assert error is not None
    lines = [issue.line or 0 for issue in error.issues]
    assert lines == sorted(lines), str(error)


def test_yaml_dump_of_deep_python_data_is_not_needed() -> None:
    """Guard for the helper above: the nesting strategy produces valid YAML flow text."""
    assert yaml.safe_load(nest(3, ["l", "m"])) == [{"a": [1]}]


# ---- sub-millisecond durations ---------------------------------------------------------------


@pytest.mark.parametrize("deadline", ["0.0004", "0.9", "1e-9"])
def test_a_deadline_below_a_second_is_refused_at_load(tmp_path: Path, deadline: str) -> None:
    """Before: `deadline_s: 0.0004` loaded and reached the node as `timeout 0.000` (no limit)."""
    error = outcome(
        tmp_path, PAPER.read_text().replace("deadline_s: 900", f"deadline_s: {deadline}")
    )
    assert error is not None
    (issue,) = [i for i in error.issues if i.path == ("deadline_s",)]
    assert "at least 1" in issue.message and issue.line is not None


@pytest.mark.parametrize("value", [0.0004, 1e-9, 0.0, 0.0011])
def test_a_tiny_timeout_is_rounded_up_never_rendered_as_zero(value: float) -> None:
    from r2bench.nodes.ssh import timeout_line
    from r2bench.shellwords import seconds

    assert float(seconds(value)) >= 0.001 and float(seconds(value)) >= value
    line = timeout_line(["true"], value)
    assert re.fullmatch(r"timeout -k \d+ (\S+) true", line)
    assert float(line.split()[3]) > 0, line


def test_the_script_never_renders_a_zero_deadline(tmp_path: Path) -> None:
    from r2bench.commands.plan_script import node_script

    plan = make_plan(load_inputs(PAPER, TESTBED))
    run = plan.runs[0].model_copy(
        update={"spec": plan.runs[0].spec.model_copy(update={"deadline_s": 0.0004})}
    )
    text = node_script(plan.model_copy(update={"runs": [run]}), run.launch.node)
    (limit,) = re.findall(r"timeout --signal=TERM --kill-after=10 (\S+) ", text)
    assert float(limit) >= 0.001, limit


def test_max_runs_raises_the_limit_and_repeats_count(tmp_path: Path) -> None:
    body = SWEEP_BOMB.replace("    D: *v\n    E: *v\n    F: *v\n    G: *v\n", "")
    error = outcome(tmp_path, body + "repeats: 200\n")
    assert error is not None and "expands to 200000 runs" in str(error), str(error)
    error = outcome(tmp_path, body.replace("    C: *v\n", "") + "max_runs: 50\n")
    assert error is not None and "expands to 100 runs" in str(error)
    assert outcome(tmp_path, body.replace("    C: *v\n", "") + "max_runs: 100\n") is None


def test_known_hosts_on_a_device_is_refused_before_reading() -> None:
    from fabric import Connection

    from r2bench.config.testbed import SshOptions
    from r2bench.nodes.ssh import _secure
    from r2bench.safeio import InputRefused

    with pytest.raises(InputRefused, match="known_hosts"):
        _secure(Connection("127.0.0.1"), SshOptions(known_hosts="/dev/zero"))


@pytest.mark.parametrize("depth", [9, 12])
def test_nested_aliases_in_a_config_are_refused_located(tmp_path: Path, depth: int) -> None:
    lines = ["name: laughs", "extra:", "  l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, depth)]
    with pytest.raises(ConfigError) as info:
        parse_yaml("\n".join(lines) + "\n", "laughs.yaml")
    (issue,) = info.value.issues
    assert "alias" in issue.message and issue.line is not None and issue.path[0] == "extra"


def test_nested_aliases_in_a_compare_reference_or_policy_are_refused(tmp_path: Path) -> None:
    """Before: yaml.safe_load built the shared structure, and walking it never ended."""
    from r2bench.compare.policy import load_policy
    from r2bench.compare.reference import CompareInputError, load_reference

    path = tmp_path / "reference.yaml"
    path.write_text("format: r2bench-reference/1\nseries: []\n" + LAUGHS)
    with pytest.raises(CompareInputError, match=r"reference.yaml:\d+:\d+: .*alias"):
        load_reference(path)
    with pytest.raises(ValueError, match=r"reference.yaml:\d+:\d+: .*alias"):
        load_policy(path)
    with pytest.raises(CompareInputError, match="not a regular file"):
        load_reference(Path("/dev/zero"))


# ---- strict scalars: env values stay as written ------------------------------------------------


def test_env_values_keep_the_text_the_user_wrote(tmp_path: Path) -> None:
    """Before: YAML 1.1 read `1:30` as 90, `010` as 8, `0x10` as 16 and `1.10` as 1.1."""
    written = {"A_TIME": "1:30", "B_OCTAL": "010", "C_HEX": "0x10", "D_FLOAT": "1.10"}
    written |= {"E_UNDERSCORE": "1_000", "F_EXP": "1e3", "G_PLAIN": "42"}
    env = "".join(f"  {name}: {text}\n" for name, text in written.items())
    body = PAPER.read_text().replace("env:\n", "env:\n" + env)
    path = tmp_path / "env.yaml"
    path.write_text(body)
    plan = make_plan(load_inputs(path, TESTBED))
    for name, text in written.items():
        assert plan.runs[0].spec.env[name] == text, name
    swept = PAPER.read_text().replace("  matrix:\n", "  matrix:\n    B_OCTAL: [010, 011]\n")
    path.write_text(swept)
    values = {run.spec.env["B_OCTAL"] for run in make_plan(load_inputs(path, TESTBED)).runs}
    assert values == {"010", "011"}


# ---- YAML that refers to itself, numbers Python will not convert ----------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [*x]\n",
        "a: &x {b: *x}\n",
        "a: &x [1, [2, *x]]\n",
        "name: t\nextra: &x {k: [*x]}\n",
    ],
)
def test_a_self_referencing_anchor_is_a_located_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "self.yaml")
    (issue,) = info.value.issues
    assert "refers to itself" in issue.message and issue.line is not None


@pytest.mark.parametrize("kind", ["experiment", "testbed", "reference", "policy"])
def test_a_self_referencing_anchor_in_any_file_exits_2(
    tmp_path: Path, kind: str, small_sweep: Path
) -> None:
    path = tmp_path / f"{kind}.yaml"
    path.write_text("name: x\nextra: &a [*a]\n")
    testbed = paths.CORPUS / "testbed.yaml"
    args = {
        "experiment": ["plan", str(path), "-t", str(testbed)],
        "testbed": [
            "plan",
            str(paths.REPO / "experiments/paper/one-nic-down.yaml"),
            "-t",
            str(path),
        ],
        "reference": ["compare", str(path), str(small_sweep)],
        "policy": ["compare", "--policy", str(path), str(small_sweep), str(small_sweep)],
    }[kind]
    result = invoke_as_main(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "bug in r2bench" not in result.output


@pytest.mark.parametrize("digits", [4301, 5001, 100_000])
def test_an_integer_too_long_to_convert_is_a_located_error(digits: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(f"name: t\nrepeats: {'9' * digits}\n", "big.yaml")
    (issue,) = info.value.issues
    assert issue.path == ("repeats",) and issue.line == 2 and "digits" in issue.message


def test_a_long_integer_as_an_env_value_is_kept_as_written() -> None:
    # An env value is text: a long run of digits there is what the user wrote, never a crash.
    text = "env: {X: '" + "9" * 5001 + "'}\n"
    assert parse_yaml(text).data["env"]["X"] == "9" * 5001


# ---- digits are ASCII digits wherever a number is read from text ----------------------------


@pytest.mark.parametrize("size", ["\u0668K", "\u0661\u0662", "\uff18M", "8\u00b9K", "\u00b2"])
def test_sizes_in_other_scripts_digits_are_refused(size: str) -> None:
    with pytest.raises(ValueError, match="expected a size"):
        parse_size(size)
