"""Plan's warnings about variables a run's library never reads or that skew its figures."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths

ROOT = paths.REPO
CLOUDLAB = ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
BASE = "name: t\ncollectives: [all_reduce]\nsizes: {begin: 8, end: 1M}\n"


def _notes(tmp_path: Path, body: str, testbed: Path = CLOUDLAB) -> list[str]:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + body)
    return [n for n in make_plan(load_inputs(path, testbed)).notes if "warning:" in n]


def test_the_bare_timeout_name_is_located_and_named_right(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        BASE + "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  R2CC_FAILOVER_TIMEOUT_MS: 2000\n"
    )
    result = CliRunner().invoke(
        app, ["plan", str(path), "-t", str(CLOUDLAB)], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())  # the terminal wraps long lines
    assert (
        f"{path}:7:3: env.R2CC_FAILOVER_TIMEOUT_MS: warning: library 'r2ccl' (r2ccl at "
        "f45cbcb) never reads" in output
    )
    assert "did you mean NCCL_R2CC_FAILOVER_TIMEOUT_MS?" in output
    assert "(32 s at their defaults)" in output  # f45cbcb derives it


def test_the_bare_timeout_name_at_main_names_main_s_default(tmp_path: Path) -> None:
    body = (
        "libraries:\n  r2ccl: {recipe: r2ccl, ref: main}\nenv:\n  R2CC_FAILOVER_TIMEOUT_MS: 2000\n"
    )
    (note,) = _notes(tmp_path, body)
    assert "(r2ccl at main) never reads" in note and "default: 5000 ms" in note


def test_the_declared_failure_is_read_at_main_only(tmp_path: Path) -> None:
    env = "env:\n  R2CC_FAILED_NODE: 0\n  R2CC_FAILED_HCA: mlx5_2\n  R2CC_AR_STAGE2_CHUNKS: 4\n"
    pinned = _notes(tmp_path, "libraries:\n  r2ccl: {recipe: r2ccl}\n" + env)
    hca = next(n for n in pinned if "env.R2CC_FAILED_HCA" in n)
    assert "(r2ccl at f45cbcb) never reads R2CC_FAILED_HCA: it is read from main on" in hca
    assert "modes 2/3 always mask the last NIC" in hca
    assert any("never reads R2CC_AR_STAGE2_CHUNKS" in n for n in pinned)
    main = "libraries:\n  r2ccl: {recipe: r2ccl, ref: 43c3ea4}\n" + env
    assert _notes(tmp_path, main) == []


def test_mode_3_at_the_pinned_commit_returns_wrong_data(tmp_path: Path) -> None:
    body = "libraries:\n  r2ccl: {{recipe: r2ccl{ref}, env: {{R2CC_MODE: 3}}}}\n"
    (note,) = _notes(tmp_path, body.format(ref=""))
    assert "mode 3 at f45cbcb returns wrong results" in note
    assert "libraries.r2ccl.env.R2CC_MODE" in note
    assert _notes(tmp_path, body.format(ref=", ref: main")) == []


def test_a_chunk_count_outside_1_to_16_is_named(tmp_path: Path) -> None:
    body = "libraries:\n  r2ccl: {recipe: r2ccl, ref: main}\nenv:\n  R2CC_AR_STAGE2_CHUNKS: 32\n"
    (note,) = _notes(tmp_path, body)
    assert "R2CC_AR_STAGE2_CHUNKS=32 is outside 1-16" in note


def test_an_unknown_ref_takes_the_newest_table_and_says_so_once(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        BASE + "libraries:\n  a: {recipe: r2ccl, ref: deadbeef99}\n"
        "  b: {recipe: r2ccl, ref: deadbeef99, env: {R2CC_MODE: 2}}\n"
        "env:\n  R2CC_FAILED_HCA: mlx5_2\n"
    )
    notes = make_plan(load_inputs(path, CLOUDLAB)).notes
    said = [n for n in notes if "ref 'deadbeef99' is not one r2bench has read" in n]
    assert len(said) == 1 and "newest known (main" in said[0]
    assert not [n for n in notes if "warning:" in n]  # main reads R2CC_FAILED_HCA


def test_r2cc_variables_set_per_node_are_refused_as_a_warning(tmp_path: Path) -> None:
    testbed = tmp_path / "tb.yaml"
    text = CLOUDLAB.read_text().replace(
        "    gpus: 8\n", "    gpus: 8\n    env: {R2CC_MODE: '2'}\n", 1
    )
    assert text != CLOUDLAB.read_text()
    testbed.write_text(text)
    (note,) = _notes(tmp_path, "libraries:\n  r2ccl: {recipe: r2ccl}\n", testbed)
    assert f"{testbed}:" in note and "env.R2CC_MODE" in note
    assert "must agree on every rank" in note


def test_the_right_name_is_quiet(tmp_path: Path) -> None:
    body = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  NCCL_R2CC_FAILOVER_TIMEOUT_MS: 2000\n  NCCL_DEBUG: WARN\n"
    assert _notes(tmp_path, body) == []


def test_r2cc_variables_do_nothing_for_stock_nccl(tmp_path: Path) -> None:
    body = "libraries:\n  stock: {recipe: system, env: {NCCL_R2CC_FAILOVER_TIMEOUT_MS: 500}}\n"
    (note,) = _notes(tmp_path, body)
    assert "libraries.stock.env.NCCL_R2CC_FAILOVER_TIMEOUT_MS" in note
    assert "library 'stock' (system) reads no R2CC variable" in note


def test_a_misspelt_nccl_or_r2cc_variable_gets_a_did_you_mean(tmp_path: Path) -> None:
    body = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  NCCL_SOCKET_IFNAM: eth1\n  R2CC_MDOE: 1\n"
    notes = _notes(tmp_path, body)
    assert any("NCCL_SOCKET_IFNAM" in n and "did you mean NCCL_SOCKET_IFNAME?" in n for n in notes)
    assert any("R2CC_MDOE" in n and "did you mean R2CC_MODE?" in n for n in notes)


def test_r2cc_logging_in_fault_free_runs_is_a_performance_warning(tmp_path: Path) -> None:
    body = (
        "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  NCCL_DEBUG: INFO\n"
        "  NCCL_DEBUG_FILE: /dev/stderr\n  NCCL_DEBUG_SUBSYS: INIT,R2CC\n"
    )
    (note,) = _notes(tmp_path, body)
    assert "R2CC logging in runs without a fault" in note and "zip it with scenario" in note
    quiet = body.replace("INIT,R2CC", "INIT,ENV")
    assert _notes(tmp_path, quiet) == []


def test_a_one_character_socket_ifname_is_ignored_by_nccl(tmp_path: Path) -> None:
    body = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  NCCL_SOCKET_IFNAME: d\n"
    (note,) = _notes(tmp_path, body)
    assert "NCCL ignores NCCL_SOCKET_IFNAME='d'" in note


def test_disconnected_hca_over_sockets_and_on_ib_without_a_step(tmp_path: Path) -> None:
    socket = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  R2CC_DISCONNECTED_HCA: '0'\n  NCCL_IB_DISABLE: 1\n"
    (note,) = _notes(tmp_path, socket)
    assert "does nothing here: R-2CCL injects it in its IB transport only" in note
    ib = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  R2CC_DISCONNECTED_HCA: mlx5_1\n"
    (note,) = _notes(tmp_path, ib)
    assert "lands in nccl-tests' warm-up" in note
    stepped = ib + "  R2CC_DISCONNECTED_STEP: 400\n"
    assert _notes(tmp_path, stepped) == []
    assert _notes(tmp_path, ib.replace("mlx5_1", "none")) == []


def test_nccl_info_logging_on_stdout_breaks_result_rows(tmp_path: Path) -> None:
    """Measured on R-2CCL at INFO: NCCL's buffered stdout cut nccl-tests' rows apart."""
    body = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  NCCL_DEBUG: INFO\n"
    (note,) = _notes(tmp_path, body)
    assert "NCCL_DEBUG=INFO with no NCCL_DEBUG_FILE" in note and "/dev/stderr" in note
    assert _notes(tmp_path, body + "  NCCL_DEBUG_FILE: /dev/stderr\n") == []


def test_a_failover_timer_longer_than_the_run_is_named(tmp_path: Path) -> None:
    """At f45cbcb the unset timer is the derived 32 s: a fault 5 s into a 20 s run cannot fail
    over. At main the default is 5000 ms, which fits."""
    fault = (
        "scenarios:\n  - name: cut\n    faults:\n      - {kind: ib_port_down, node: node0, "
        "nic: mlx5_3, trigger: {after_s: 5}}\ndeadline_s: 20\n"
    )
    (note,) = _notes(tmp_path, "libraries:\n  r2ccl: {recipe: r2ccl}\n" + fault)
    assert "libraries.r2ccl: warning: library 'r2ccl' (r2ccl at f45cbcb) waits 32 s" in note
    assert "leaves 15 s between its first fault and the deadline" in note
    assert _notes(tmp_path, "libraries:\n  r2ccl: {recipe: r2ccl, ref: main}\n" + fault) == []
    off = (
        "libraries:\n  r2ccl: {recipe: r2ccl, ref: main, env: {NCCL_R2CC_FAILOVER_TIMEOUT_MS: 0}}\n"
    )
    (note,) = _notes(tmp_path, off + fault)
    assert (
        "libraries.r2ccl.env.NCCL_R2CC_FAILOVER_TIMEOUT_MS" in note and "never fails over" in note
    )


def test_info_logging_of_the_emulator_is_not_warned_about(tmp_path: Path) -> None:
    """The emulated benchmark writes its NCCL-style log on stderr and whole result rows on
    stdout, where the first-result trigger reads them: nothing to warn about. A library the
    benchmark loads (R-2CCL's libnccl.so) shares its stdout and is still warned about."""
    emulated = (
        "benchmark: {recipe: emulated}\nlibraries:\n  m0: {recipe: emulated-lib}\n"
        "env:\n  NCCL_DEBUG: INFO\n"
    )
    assert _notes(tmp_path, emulated, VIRTUAL) == []
    real = "libraries:\n  r2ccl: {recipe: r2ccl}\nenv:\n  NCCL_DEBUG: INFO\n"
    (note,) = _notes(tmp_path, real, VIRTUAL)
    assert "NCCL_DEBUG=INFO with no NCCL_DEBUG_FILE" in note


def test_the_quickstart_plans_with_no_warnings() -> None:
    quickstart = ROOT / "experiments" / "quickstart.yaml"
    notes = make_plan(load_inputs(quickstart, VIRTUAL)).notes
    assert [n for n in notes if "warning:" in n] == []
