"""The `recovery` dimension as the plan expands it: one run per strategy, the strategy in the
run id, each strategy's workload flags, the refusals located at the setting, and run ids of
experiments without `recovery:` unchanged."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from r2bench.config.experiment import RecoveryOptions
from r2bench.config.recipes import load_recipes
from r2bench.plan.runspec import RunSpec
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

RECOVERY = paths.REPO / "experiments" / "recovery.yaml"
TRAINING = paths.REPO / "experiments" / "training.yaml"

BASE = """\
name: r
libraries:
  stock: {recipe: emulated-nccl}
  r2ccl: {recipe: emulated-lib}
benchmark: {recipe: train-emulated}
training: {updates: 30}
scenarios:
  - name: cut
    faults:
      - {kind: link_down, node: node1, nic: nic1, trigger: {after_s: 0, since: update, update: 5}}
virtual_testbed: {nodes: 3, nics: 4}
"""


def _plan(path: Path) -> tuple[int, Any]:
    ran = invoke_as_main("plan", str(path), "--json")
    if ran.exit_code != 0:
        return ran.exit_code, ran.output + ran.stderr
    return 0, json.loads(ran.output)


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(body)
    return path


def _argv(run: dict[str, Any]) -> list[str]:
    words = shlex.split(run["launch"]["command"])
    return words[words.index("r2bench.workloads.train_emulated") + 1 :]


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_recovery_experiment_plans_each_sensible_strategy_with_its_flags() -> None:
    code, plan = _plan(RECOVERY)
    assert code == 0, plan
    runs = {
        (r["spec"]["library_label"], r["spec"]["recovery"]["strategy"]): r for r in plan["runs"]
    }
    assert sorted({key for key in runs}) == [
        ("nccl-emulated", "none"), ("nccl-emulated", "restart"), ("nccl-emulated", "shrink"),
        ("r2ccl-m0", "in_library"), ("r2ccl-m0", "none"),
    ]  # fmt: skip
    assert len(plan["runs"]) == 10  # each under `none` and `nic1-down`
    restart = runs[("nccl-emulated", "restart")]
    argv = _argv(restart)
    assert _flag(argv, "--checkpoint-dir") == f"{restart['run_dir']}/checkpoints"
    assert _flag(argv, "--checkpoint-every") == "10"
    assert _flag(argv, "--watchdog-s") == "2"
    assert "--on-failure" not in argv
    shrink = _argv(runs[("nccl-emulated", "shrink")])
    assert _flag(shrink, "--on-failure") == "shrink" and _flag(shrink, "--watchdog-s") == "2"
    assert "--checkpoint-dir" not in shrink
    for key in (("nccl-emulated", "none"), ("r2ccl-m0", "in_library")):
        argv = _argv(runs[key])
        assert not {"--watchdog-s", "--checkpoint-dir", "--on-failure"} & set(argv)
    ids = [r["spec"]["run_id"] for r in plan["runs"]]
    assert any(i.startswith("train-r2ccl-m0-in_library-nic1-down-r0-") for i in ids)
    assert any(i.startswith("train-nccl-emulated-restart-none-r0-") for i in ids)
    assert restart["spec"]["recovery"]["restart_limit"] == 3


def test_an_experiment_without_recovery_keeps_its_run_ids() -> None:
    code, plan = _plan(TRAINING)
    assert code == 0, plan
    for run in plan["runs"]:
        assert run["spec"]["recovery"] is None
        spec = RunSpec.model_validate({k: v for k, v in run["spec"].items() if k != "run_id"})
        assert "recovery" not in spec.canonical_json()
        assert spec.run_id == run["spec"]["run_id"]


def test_a_library_without_the_strategy_is_refused_at_the_strategy(tmp_path: Path) -> None:
    body = BASE + "recovery: {strategies: [none, in_library]}\n"
    code, said = _plan(_write(tmp_path, body))
    assert code != 0
    assert "library 'stock' (emulated-nccl) offers no in_library recovery (shrink)" in said
    assert "exp.yaml:12:31: recovery.strategies[1]: " in said
    assert "exclude it: {library: stock, recovery: in_library}" in said
    excluded = body + "sweep: {exclude: [{library: stock, recovery: in_library}]}\n"
    code, plan = _plan(_write(tmp_path, excluded))
    assert code == 0, plan
    assert len(plan["runs"]) == 6  # stock: none; r2ccl: none, in_library; x 2 scenarios


def test_the_recipes_offer_what_their_libraries_have(tmp_path: Path) -> None:
    recipes = load_recipes()
    assert recipes["emulated-lib"].recovery == ["in_library", "shrink"]
    assert recipes["emulated-nccl"].recovery == ["shrink"]
    assert recipes["r2ccl"].recovery == ["in_library"]  # NCCL 2.23.4: no ncclCommShrink
    assert recipes["vanilla"].recovery == []
    assert recipes["system"].recovery == ["shrink"]
    body = BASE + "recovery: {strategies: [shrink]}\n"
    code, plan = _plan(_write(tmp_path, body))
    assert code == 0, plan  # both emulated libraries shrink
    assert {r["spec"]["recovery"]["strategy"] for r in plan["runs"]} == {"shrink"}


def test_a_strategy_the_training_job_does_not_carry_out_is_refused(tmp_path: Path) -> None:
    recipes = load_recipes()
    assert recipes["train-emulated"].job_recovery == ["restart", "shrink"]
    assert recipes["train-torch"].job_recovery == ["restart"]
    body = (
        BASE.replace("train-emulated", "train-torch").replace("emulated-nccl", "system")
        .replace("emulated-lib", "r2ccl")
        + "recovery: {strategies: [none, restart, shrink]}\n"
    )  # fmt: skip
    code, said = _plan(_write(tmp_path, body))
    assert code != 0
    assert "exp.yaml:12:40: recovery.strategies[2]: " in said
    assert "benchmark train-torch does not shrink (its job carries out: restart)" in said
    assert "1 problem found" in said  # one refusal, not one per library
    assert "does not restart" not in said


def test_recovery_with_a_collective_benchmark_is_refused(tmp_path: Path) -> None:
    body = (
        "name: c\nlibraries:\n  lib: {recipe: emulated-lib}\nbenchmark: {recipe: emulated}\n"
        "recovery: {strategies: [none]}\n"
    )
    code, said = _plan(_write(tmp_path, body))
    assert code != 0
    assert "`recovery:` is a training job's strategy" in said


def test_sweeping_recovery_without_a_recovery_section_says_so(tmp_path: Path) -> None:
    body = BASE + "sweep: {matrix: {recovery: [restart]}}\n"
    code, said = _plan(_write(tmp_path, body))
    assert code != 0
    assert "`recovery` is swept but the experiment has no `recovery:` section" in said


def test_a_strategy_listed_twice_or_unknown_is_refused() -> None:
    with pytest.raises(ValidationError, match="strategy restart listed twice"):
        RecoveryOptions.model_validate({"strategies": ["restart", "restart"]})
    with pytest.raises(ValidationError):
        RecoveryOptions.model_validate({"strategies": ["reboot"]})
    options = RecoveryOptions.model_validate({"strategies": ["none"]})
    assert (options.watchdog_s, options.checkpoint_every, options.restart_limit) == (10, 10, 3)


def test_the_runs_table_names_each_runs_strategy() -> None:
    ran = invoke_as_main("plan", str(RECOVERY), env={"COLUMNS": "250"})
    assert ran.exit_code == 0, ran.output
    assert "small x 60 updates, recovery restart" in ran.output
    assert "small x 60 updates, recovery in_library" in ran.output
