"""The field's outcome classes (analysis/verdict.py), failover armed or not (analysis/armed.py)
and pre-told or blind (analysis/pretold.py).

The failover logs under tests/data/failover are written from the facts, not captured (their
README says from what)."""

from __future__ import annotations

import pytest

from r2bench.analysis.armed import Armed, Failover, armed, failover_of, is_failover_line
from r2bench.analysis.verdict import SCORED, OutcomeClass, mapping, verdict_of
from r2bench.config.pretold import Told, told
from r2bench.parse.models import OutcomeStatus
from tests.support import paths

LOGS = paths.DATA / "failover"

EXPECTED = {
    OutcomeStatus.OK: OutcomeClass.TRANSPARENT,
    OutcomeStatus.WRONG_RESULTS: OutcomeClass.SILENT_WRONG,
    OutcomeStatus.CRASHED: OutcomeClass.DECLINED,
    OutcomeStatus.TIMEOUT: OutcomeClass.HUNG,
    OutcomeStatus.INCOMPLETE: OutcomeClass.OTHER,
    OutcomeStatus.FAULT_MISSED: OutcomeClass.MISSED,
    OutcomeStatus.FAULT_NOT_INJECTED: OutcomeClass.MISSED,
    OutcomeStatus.FAULT_WITHOUT_EFFECT: OutcomeClass.MISSED,
    OutcomeStatus.LAUNCH_FAILED: OutcomeClass.UNSCORED,
    OutcomeStatus.BUILD_FAILED: OutcomeClass.UNSCORED,
    OutcomeStatus.INTERRUPTED: OutcomeClass.UNSCORED,
    OutcomeStatus.NOT_NCCL_TESTS: OutcomeClass.UNSCORED,
    OutcomeStatus.WRONG_LIBRARY: OutcomeClass.UNSCORED,
}


@pytest.mark.parametrize("status", list(OutcomeStatus))
def test_every_outcome_has_its_class(status: OutcomeStatus) -> None:
    assert verdict_of(status, faulted=True) is EXPECTED[status]
    assert verdict_of(status.value, faulted=True) is EXPECTED[status]  # as the tables store it
    assert verdict_of(status, faulted=False) is OutcomeClass.NO_FAULT


def test_the_mapping_covers_every_outcome_and_only_scored_classes_are_predictable() -> None:
    assert set(mapping()) == set(OutcomeStatus)
    assert OutcomeClass.UNSCORED not in SCORED and OutcomeClass.NO_FAULT not in SCORED


def test_no_outcome_or_an_unknown_one_is_unscored() -> None:
    assert verdict_of(None, faulted=True) is OutcomeClass.UNSCORED
    assert verdict_of("some_newer_outcome", faulted=True) is OutcomeClass.UNSCORED


def _lines(name: str) -> list[str]:
    raw = (LOGS / name).read_bytes().splitlines()
    return [line.decode() for line in raw if is_failover_line(line)]


def test_nccl_single_device_is_unarmed() -> None:
    check = armed(Failover.NCCL_PORT, _lines("nccl-single-device.log"), {})
    assert check.state is Armed.UNARMED
    assert "with a single device" in check.text


def test_nccl_fused_device_is_armed() -> None:
    check = armed(Failover.NCCL_PORT, _lines("nccl-fused.log"), {})
    assert check.state is Armed.ARMED and "mlx5_1+mlx5_3" in check.text


def test_nccl_cross_numa_is_unarmed() -> None:
    check = armed(Failover.NCCL_PORT, _lines("nccl-cross-numa.log"), {})
    assert check.state is Armed.UNARMED and "NUMA" in check.text


def test_a_log_without_the_lines_says_unknown() -> None:
    assert armed(Failover.NCCL_PORT, [], {}).state is Armed.UNKNOWN
    assert armed(Failover.R2CCL, [], {}).state is Armed.UNKNOWN


def test_r2ccl_armed_and_unarmed() -> None:
    assert armed(Failover.R2CCL, _lines("r2ccl-armed.log"), {}).state is Armed.ARMED
    check = armed(Failover.R2CCL, _lines("r2ccl-plugin.log"), {})
    assert check.state is Armed.UNARMED
    assert "Loaded net plugin" in check.text and "R2CC_AR_STAGE2_CHUNKS" in check.text


@pytest.mark.parametrize(
    ("env", "nics", "transport", "words"),
    [
        ({"NCCL_NET_PLUGIN": "libnccl-net.so"}, 3, None, "NCCL_NET_PLUGIN"),
        ({}, 1, None, "no other NIC"),
        ({}, 4, "NET/Socket+P2P", "NET/Socket"),
    ],
)
def test_r2ccl_unarmed_by_settings_and_testbed(
    env: dict[str, str], nics: int, transport: str | None, words: str
) -> None:
    lines = _lines("r2ccl-armed.log")
    check = armed(Failover.R2CCL, lines, env, data_nics=nics, transport=transport)
    assert check.state is Armed.UNARMED and words in check.text
    assert armed(Failover.R2CCL, lines, {"NCCL_NET_PLUGIN": "none"}).state is Armed.ARMED


def test_which_failover_a_run_has() -> None:
    assert failover_of("r2ccl", {}) is Failover.R2CCL
    assert failover_of("emulated-lib", {}) is Failover.R2CCL
    assert failover_of("nccl-upstream", {"NCCL_IB_RESILIENCY_PORT_FAILOVER": "1"}) is (
        Failover.NCCL_PORT
    )
    assert failover_of("nccl", {"NCCL_IB_RESILIENCY_PORT_FAILOVER": "0"}) is Failover.NONE
    assert armed(Failover.NONE, _lines("nccl-single-device.log"), {}).state is Armed.NOT_CLAIMED


def test_pre_told_blind_and_declared() -> None:
    artifact_01 = {"R2CC_FAILED_NODE": "0", "R2CC_FAILED_HCA": "mlx5_2", "R2CC_MODE": "0"}
    artifact_09 = {"R2CC_MODE": "0", "R2CC_AR_AFTER_REPAIR": "2"}
    assert told(artifact_01, real_fault=True) is Told.PRE_TOLD
    assert told(artifact_09, real_fault=True) is Told.BLIND
    assert told(artifact_01, real_fault=False) is Told.DECLARED
    assert told(artifact_09, real_fault=False) is Told.NONE
    assert told({"R2CC_FAILED_HCA": ""}, real_fault=True) is Told.BLIND
