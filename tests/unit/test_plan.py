"""`r2bench plan`: sweep expansion, exact commands, quoting, stable run ids, JSON output."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.config import source
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import Plan
from tests.support import paths

ROOT = paths.REPO
PAPER = ROOT / "experiments" / "paper" / "one-nic-down.yaml"
CLOUDLAB = ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
R7525 = ROOT / "experiments" / "r7525"


def plan_of(experiment: Path, testbed: Path = CLOUDLAB) -> Plan:
    return make_plan(load_inputs(experiment, testbed))


def write_experiment(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text("name: t\nlibraries:\n  r2ccl: {recipe: r2ccl}\n" + body)
    return path


def test_paper_plan_has_mode1_fault_run_with_inject_and_revert() -> None:
    result = CliRunner().invoke(
        app, ["plan", str(PAPER), "--testbed", str(CLOUDLAB), "--commands"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    plan = plan_of(PAPER)
    run = next(r for r in plan.runs if r.spec.env["R2CC_MODE"] == "1" and r.faults)
    argv = shlex.split(run.launch.command)
    assert (
        argv[0] == "mpirun"
        and "R2CC_MODE=1" in argv
        and argv[argv.index("R2CC_MODE=1") - 1] == "-x"
    )
    assert (
        "ib_port.sh inject" in run.faults[0].inject.command
        and "--ca mlx5_3" in run.faults[0].inject.command
    )
    assert "ib_port.sh revert" in run.faults[0].revert.command
    assert run.faults[0].node == "node1" and run.faults[0].heal_after_s == 65
    assert "-x R2CC_MODE=1" in result.output and "--ca mlx5_3" in result.output


def test_paper_plan_counts_modes_scenarios_repeats() -> None:
    plan = plan_of(PAPER)
    assert len(plan.runs) == 4 * 2 * 3  # modes x (none, nic1-down) x repeats
    assert {r.spec.env["R2CC_MODE"] for r in plan.runs} == {"0", "1", "2", "3"}
    assert len({r.spec.run_id for r in plan.runs}) == len(plan.runs)


def test_run_ids_are_stable_and_depend_on_the_spec(tmp_path: Path) -> None:
    first = [r.spec.run_id for r in plan_of(PAPER).runs]
    assert first == [r.spec.run_id for r in plan_of(PAPER).runs]
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        PAPER.read_text().replace(
            "NCCL_R2CC_FAILOVER_TIMEOUT_MS: 5000", "NCCL_R2CC_FAILOVER_TIMEOUT_MS: 4000"
        )
    )
    assert set(first).isdisjoint(r.spec.run_id for r in plan_of(changed).runs)


def test_mpirun_line_carries_library_path_and_bootstrap_interface() -> None:
    argv = shlex.split(plan_of(PAPER).runs[0].launch.command)
    assert (
        "LD_LIBRARY_PATH=/local/r2bench/src/r2ccl-f45cbcb/build/lib:/usr/local/cuda-12.4/lib64"
        in argv
    )
    assert argv[argv.index("btl_tcp_if_include") + 1] == "enp170s0np0"
    assert argv[argv.index("-np") + 1] == "16" and argv[argv.index("--map-by") + 1] == "ppr:8:node"
    assert argv[-2:] == [
        "-J",
        f"/local/r2bench/runs/{plan_of(PAPER).runs[0].spec.run_id}/result.json",
    ]


def test_setup_builds_nccl_tests_against_the_library_under_test() -> None:
    setup = {step.recipe: step for step in plan_of(PAPER).setup}
    assert set(setup) == {"r2ccl", "nccl-tests"}
    assert "NCCL_HOME=/local/r2bench/src/r2ccl-f45cbcb/build" in setup["nccl-tests"].commands[-1]
    assert "compute_90,code=sm_90" in setup["r2ccl"].commands[-1]


def test_shell_metacharacters_in_values_are_quoted_never_interpreted(tmp_path: Path) -> None:
    hostile = "$(touch /tmp/pwned); `id` && rm -rf / | x > y"
    exp = write_experiment(tmp_path, f"env:\n  NCCL_SOCKET_IFNAME: {json.dumps(hostile)}\n")
    for run in plan_of(exp).runs:
        argv = shlex.split(run.launch.command)
        assert f"NCCL_SOCKET_IFNAME={hostile}" in argv  # one word, exactly the value


def test_sweep_matrix_zip_and_exclude(tmp_path: Path) -> None:
    exp = write_experiment(
        tmp_path,
        "scenarios:\n"
        "  - name: down\n"
        "    faults: [{kind: ib_port_down, node: node1, nic: mlx5_4, trigger: {after_s: 1}}]\n"
        "sweep:\n"
        "  matrix:\n    R2CC_MODE: [0, 1, 2, 3]\n"
        "  zip:\n    - {NCCL_IB_TIMEOUT: [18, 20], NCCL_R2CC_FAILOVER_TIMEOUT_MS: [1000, 5000]}\n"
        "  exclude:\n    - {scenario: down, R2CC_MODE: 0}\n",
    )
    runs = plan_of(exp).runs
    combos = {
        (
            r.spec.env["R2CC_MODE"],
            r.spec.scenario,
            r.spec.env["NCCL_IB_TIMEOUT"],
            r.spec.env["NCCL_R2CC_FAILOVER_TIMEOUT_MS"],
        )
        for r in runs
    }
    assert len(runs) == len(combos) == (4 + 3) * 2
    assert ("0", "down", "18", "1000") not in combos and ("1", "down", "20", "5000") in combos
    assert ("1", "none", "18", "5000") not in combos  # zip pairs values, it does not cross them


def test_size_list_makes_one_job_per_size(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path, "sizes: [1M, 64M]\n")
    runs = plan_of(exp).runs
    assert sorted((r.spec.size_begin, r.spec.size_end) for r in runs) == [
        (1 << 20, 1 << 20),
        (64 << 20, 64 << 20),
    ]


def test_quickstart_on_virtual_testbed_maps_nics_per_node() -> None:
    plan = plan_of(QUICKSTART, VIRTUAL)
    argv = shlex.split(plan.runs[0].launch.command)
    assert "R2B_NIC_MAP=node0=198.18.1.10,198.18.2.10;node1=198.18.1.11,198.18.2.11" in argv
    fault_run = next(r for r in plan.runs if r.faults)
    assert (
        "link.sh inject" in fault_run.faults[0].inject.command
        and "--dev nic1" in fault_run.faults[0].inject.command
    )


def test_a_library_entry_sets_its_variables_for_its_runs() -> None:
    """The quickstart's emulated stock NCCL and R-2CCL differ by the variable their entries set."""
    plan = plan_of(QUICKSTART, VIRTUAL)
    seen = set()
    for run in plan.runs:
        argv = shlex.split(run.launch.command)
        which = "nccl" if run.spec.library.recipe == "emulated-nccl" else "r2ccl"
        assert f"R2B_EMULATED_LIBRARY={which}" in argv
        seen.add(which)
    assert seen == {"nccl", "r2ccl"}


def test_json_output_round_trips() -> None:
    result = CliRunner().invoke(app, ["plan", str(PAPER), "-t", str(CLOUDLAB), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert Plan.model_validate(data).runs[0].spec.run_id == data["runs"][0]["spec"]["run_id"]


def test_help_lists_commands_and_none_is_a_stub() -> None:
    runner = CliRunner()
    help_text = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    for command in ("plan", "schema", "version", "sweep", "heal", "inject", "revert"):
        assert command in help_text
    assert "not implemented" not in help_text
    result = runner.invoke(app, ["sweep"])
    assert result.exit_code == 2 and "Missing argument" in result.output


def test_schema_describes_both_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["schema", "--out", str(tmp_path)])
    assert result.exit_code == 0
    experiment = json.loads((tmp_path / "experiment.schema.json").read_text())
    testbed = json.loads((tmp_path / "testbed.schema.json").read_text())
    assert "sweep" in experiment["properties"] and "nodes" in testbed["properties"]


@pytest.mark.parametrize(
    "example", sorted((ROOT / "experiments").rglob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_file_is_valid(example: Path) -> None:
    if example.name.endswith("-predictions.yaml"):  # an experiment's predictions file
        from r2bench.config.predictions import read_predictions

        assert read_predictions(example).predictions
        return
    if example.parent.name == "testbeds":
        experiment = QUICKSTART if "virtual" in example.name else PAPER
        if example.name.startswith("gpu-"):  # one host, no NICs: its own experiments
            experiment = ROOT / "experiments" / "gpu" / "smoke.yaml"
        if "r7525" in example.name:  # upstream's testbed: its own experiments
            experiment = R7525 / "03-nccl-tests-compare-all.yaml"
        result = CliRunner().invoke(app, ["plan", str(experiment), "-t", str(example)])
    else:
        testbed = (
            VIRTUAL
            if "quickstart" in example.name
            or (example.parent.name == "ci" and "virtual" in example.name)
            else CLOUDLAB
        )
        if example.parent.name == "gpu":  # one host with 2 GPUs (process faults name gpu0)
            testbed = ROOT / "experiments" / "testbeds" / "gpu-local.yaml"
        if example.parent.name == "r7525":
            testbed = ROOT / "experiments" / "testbeds" / "cloudlab-r7525.yaml"
        args = ["plan", str(example), "-t", str(testbed)]
        if "virtual_testbed:" in example.read_text():  # made for its own embedded testbed
            args = ["sweep", str(example), "--dry-run"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_benchmark_is_built_once_per_library_it_links_against(tmp_path: Path) -> None:
    exp = tmp_path / "two.yaml"
    exp.write_text(
        "name: t\nlibraries:\n  r2ccl: {recipe: r2ccl}\n  nccl: {recipe: nccl}\n"
        "sweep:\n  exclude: []\n"
    )
    plan = plan_of(exp)
    benches = [s for s in plan.setup if s.recipe == "nccl-tests"]
    assert sorted(s.built_against.recipe for s in benches if s.built_against) == ["nccl", "r2ccl"]
    assert len({s.directory for s in benches}) == 2
    for run in plan.runs:
        home = next(s.library_home for s in benches if s.built_against == run.spec.library)
        bench_dir = next(s.directory for s in benches if s.built_against == run.spec.library)
        assert f"{bench_dir}/build/all_reduce_perf" in run.launch.command and home


@pytest.mark.parametrize("width", [80, 400])
def test_runs_table_shows_every_value_at_any_width(width: int) -> None:
    """Nine columns of settings do not fit 80 characters: the table stacks each run into one
    cell rather than squeezing columns to nothing; a wide terminal keeps the columns."""
    from rich.console import Console

    from r2bench.plan.render import runs_table

    plan = plan_of(ROOT / "experiments" / "paper" / "library-vs-library.yaml")
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(runs_table(plan, console.width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    flap = next(r for r in plan.runs if r.spec.scenario == "flap-storm" and "ft" in r.spec.run_id)
    for value in (
        flap.spec.run_id,
        "nccl-ft",
        "NCCL_IB_RESILIENCY_PORT_FAILOVER",
        "ib_port_down node1/mlx5_3 @5s for 3s x5 every 10s",
    ):
        assert value in text, value


def test_vanilla_is_nccl_2_23_4_with_r2ccls_cuda13_patch(tmp_path: Path) -> None:
    """`vanilla` is the NCCL release R-2CCL forks, patched like R-2CCL for CUDA 13, beside it."""
    from r2bench.config.recipes import load_recipes

    exp = tmp_path / "v.yaml"
    exp.write_text("name: t\nlibraries:\n  r2ccl: {recipe: r2ccl}\n  vanilla: {recipe: vanilla}\n")
    plan = plan_of(exp)
    step = next(s for s in plan.setup if s.recipe == "vanilla")
    assert step.ref == "v2.23.4-1" and any("NVIDIA/nccl.git" in c for c in step.fetch)
    recipes = load_recipes(None)
    assert [p.file for p in recipes["vanilla"].patches] == [
        p.file for p in recipes["r2ccl"].patches
    ]
    assert {r.spec.library.recipe for r in plan.runs} == {"r2ccl", "vanilla"}


def test_a_sweep_on_the_embedded_testbed_reads_its_experiment_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The experiment picks the embedded testbed and is then planned: one read, one check."""
    read: list[Path] = []
    real = source.read_bytes_bounded

    def counting(path: Path, *args: Any, **kwargs: Any) -> bytes:
        read.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(source, "read_bytes_bounded", counting)
    result = CliRunner().invoke(app, ["sweep", str(QUICKSTART), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert read.count(QUICKSTART) == 1
