"""Hostile and broken input, round 4: what r2bench writes for the user (testbed headers), what
it reads from the environment (Slurm variables), and YAML that refers to itself or holds numbers
Python cannot convert. Each case is a located one-line error with exit 2 or a value kept as
written: never a traceback, never a silent change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from r2bench.config.errors import ConfigError
from r2bench.config.load import load_testbed
from r2bench.config.source import parse_yaml
from r2bench.config.types import parse_size
from r2bench.testbeds.slurm import MAX_HOSTS, SlurmError, expand_nodelist, read_allocation
from r2bench.testbeds.yamlio import comment_header
from r2bench.textsafe import prepare_streams
from tests.support import paths
from tests.support.cli_runner import Ran, invoke_as_main
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = paths.DATA / "nccl-tests"
CLOUDLAB = paths.DATA / "cloudlab" / "two-nodes-one-lan.xml"
# Every character YAML (1.1, as PyYAML reads it) takes for a line break, and a few that
# terminals do.
BREAKS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c"]
PAYLOAD = "kind: local\nlauncher: {command: sh}\npaths: {work_dir: /}"


def _invoke(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Ran:
    return invoke_as_main(*args, env=env, stdin=stdin)


# ---- values in the comment headers of written testbed files ---------------------------------


@pytest.mark.parametrize("brk", BREAKS)
def test_comment_header_keeps_any_value_on_its_line(brk: str) -> None:
    text = comment_header(
        "Made from {source}.\nsecond line {out}", source=f"x{brk}{PAYLOAD}", out="o"
    )
    assert yaml.safe_load(text + "name: t\n") == {"name": "t"}
    assert all(line.startswith("#") for line in text.splitlines())
    assert len(text.splitlines()) == 2


@pytest.mark.parametrize("brk", BREAKS)
def test_a_manifest_name_with_line_breaks_stays_in_the_comment(tmp_path: Path, brk: str) -> None:
    manifest = tmp_path / f"m{brk}{PAYLOAD.replace('/', '_')}.xml"
    shutil.copy(CLOUDLAB, manifest)
    plain = tmp_path / "plain.yaml"
    assert _invoke("cloudlab", "testbed", str(CLOUDLAB), "-o", str(plain)).exit_code == 0
    out = tmp_path / "testbed.yaml"
    result = _invoke("cloudlab", "testbed", str(manifest), "-o", str(out))
    assert result.exit_code == 0, result.output
    # The same testbed as from a plainly named copy: the name changed nothing but the comment.
    assert yaml.safe_load(out.read_text()) == yaml.safe_load(plain.read_text())
    assert load_testbed(out) == load_testbed(plain)


@pytest.mark.parametrize("brk", BREAKS)
def test_a_slurm_job_id_with_line_breaks_stays_in_the_comment(tmp_path: Path, brk: str) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_JOB_ID": f"42{brk}{PAYLOAD}"}
    out = tmp_path / "testbed.yaml"
    result = _invoke("testbed", "from-slurm", "-o", str(out), env=env)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    assert set(data) <= {"name", "description", "nodes", "launcher"}, data
    assert data["launcher"] == {"kind": "srun"}
    load_testbed(out)


def test_an_out_path_with_a_line_break_stays_in_the_comment(tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu1", "SLURM_JOB_ID": "7"}
    out = tmp_path / "a\npaths: {work_dir: x}\n.yaml"
    result = _invoke("testbed", "from-slurm", "-o", str(out), env=env)
    assert result.exit_code == 0, result.output
    assert "paths" not in yaml.safe_load(out.read_text())


# ---- manifests are read with a size cap ----------------------------------------------------


def test_a_huge_manifest_on_stdin_is_refused_fast() -> None:
    result = _invoke("cloudlab", "testbed", "-", stdin="<" * (40 * 1024 * 1024))
    assert result.exit_code == 2
    assert "larger than" in result.stderr and "Traceback" not in result.output


def test_a_manifest_that_is_a_device_is_refused_unread() -> None:
    result = _invoke("cloudlab", "testbed", "/dev/zero")
    assert result.exit_code == 2
    assert "not a regular file" in result.stderr


# ---- Slurm: ASCII digits only, node lists counted before they are built ---------------------


@pytest.mark.parametrize(
    "nodelist",
    ["gpu[\u0661-\u0662]", "gpu[\u0661]", "gpu[1-\u0663]", "gpu[\uff11-2]", "gpu[\u00b9-2]"],
)
def test_non_ascii_digits_in_a_node_list_are_refused(nodelist: str) -> None:
    with pytest.raises(SlurmError, match="bad range"):
        expand_nodelist(nodelist)


@pytest.mark.parametrize(
    "name",
    ["SLURM_JOB_NUM_NODES", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"],
)
@pytest.mark.parametrize("value", ["\u00b2", "\u0662", "1\u00b2", "\uff12", "9" * 5001])
def test_non_ascii_or_huge_counts_are_slurm_errors(name: str, value: str) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu[1-2]", name: value}
    with pytest.raises(SlurmError, match=name):
        read_allocation(env)


@pytest.mark.parametrize("tasks", ["\u00b2(x2)", "2(x\u00b2)", "9" * 5001, "1(x99999999999999)"])
def test_bad_tasks_per_node_are_slurm_errors(tasks: str) -> None:
    with pytest.raises(SlurmError, match="SLURM_TASKS_PER_NODE"):
        read_allocation({"SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_TASKS_PER_NODE": tasks})


@pytest.mark.parametrize(
    "nodelist",
    [
        "a[0-99999]b[0-99999]",
        "a[0-999]b[0-999]c[0-999]",
        ",".join(f"g{i}[0-99999]" for i in range(3)),
        "a[0-99999999999999999999]",
        "a[" + "9" * 5001 + "]",
    ],
)
def test_node_lists_over_the_cap_are_refused_before_they_are_built(nodelist: str) -> None:
    tracemalloc = pytest.importorskip("tracemalloc")
    tracemalloc.start()
    try:
        with pytest.raises(SlurmError, match=f"more than {MAX_HOSTS}|bad range"):
            expand_nodelist(nodelist)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweeps")
    cfg = SampleConfig(sweep="s", seed=1, modes=(None, "1"), scenarios=("none",), repeats=2)
    write_sample_sweep(root, CAPTURED, cfg)
    return root / "s"


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
    tmp_path: Path, kind: str, sweep: Path
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
        "reference": ["compare", str(path), str(sweep)],
        "policy": ["compare", "--policy", str(path), str(sweep), str(sweep)],
    }[kind]
    result = _invoke(*args)
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


# ---- the embedded virtual testbed's rate is checked at plan time -----------------------------

QUICKSTART = paths.REPO / "experiments" / "quickstart.yaml"
VIRTUAL_TB = paths.REPO / "experiments" / "testbeds" / "virtual-example.yaml"


@pytest.mark.parametrize(
    "rate",
    ['"0bit"', '""', '"10mbit; reboot"', '"10mbit\\n"', '"50kbit"', '"99tbit"', "12", '"1e9bit"'],
)
def test_a_bad_virtual_testbed_rate_fails_plan_located(tmp_path: Path, rate: str) -> None:
    text = QUICKSTART.read_text()
    text = text.replace("\nvirtual_testbed:", "\nvirtual_testbed_was:")
    path = tmp_path / "experiment.yaml"
    path.write_text(text + f"virtual_testbed: {{nodes: 2, nics: 4, rate: {rate}}}\n")
    result = _invoke("plan", str(path), "-t", str(VIRTUAL_TB))
    assert result.exit_code == 2, result.output
    assert "virtual_testbed.rate" in result.output and f"{path.name}:" in result.output


@pytest.mark.parametrize("rate", ["250mbit", "1gbit", "100kbit", "125mbps", "null"])
def test_a_good_virtual_testbed_rate_plans(tmp_path: Path, rate: str) -> None:
    text = QUICKSTART.read_text().replace("\nvirtual_testbed:", "\nvirtual_testbed_was:")
    path = tmp_path / "experiment.yaml"
    path.write_text(text + f"virtual_testbed: {{nodes: 2, nics: 4, rate: {rate}}}\n")
    result = _invoke("plan", str(path), "-t", str(VIRTUAL_TB))
    assert result.exit_code == 0, result.output


# ---- digits are ASCII digits wherever a number is read from text ----------------------------


@pytest.mark.parametrize("size", ["\u0668K", "\u0661\u0662", "\uff18M", "8\u00b9K", "\u00b2"])
def test_sizes_in_other_scripts_digits_are_refused(size: str) -> None:
    with pytest.raises(ValueError, match="expected a size"):
        parse_size(size)


@pytest.mark.parametrize(
    "value", ["\u00b2", "\u0668\u0660", pytest.param("9" * 5001, id="5001-digits"), "99999999999"]
)
def test_odd_terminal_sizes_are_dropped_not_a_crash(value: str) -> None:
    environ = {"COLUMNS": value, "LINES": value}
    prepare_streams(environ)
    assert environ == {}


def test_plain_terminal_sizes_are_kept() -> None:
    environ = {"COLUMNS": "120", "LINES": " 40 "}
    prepare_streams(environ)
    assert environ == {"COLUMNS": "120", "LINES": " 40 "}


def test_an_out_path_with_markup_and_escapes_is_shown_as_written(tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu1", "SLURM_JOB_ID": "7"}
    out = tmp_path / "[red]x[/red]\x1b[2J.yaml"
    result = _invoke("testbed", "from-slurm", "-o", str(out), env=env)
    assert result.exit_code == 0, result.output
    assert "[red]x[/red]\\e[2J.yaml" in result.stderr and "\x1b" not in result.stderr
    result = _invoke("cloudlab", "testbed", str(CLOUDLAB), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "[red]x[/red]\\e[2J.yaml" in result.stderr and "\x1b" not in result.stderr
