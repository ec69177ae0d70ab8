"""`r2bench testbed from-slurm`: Slurm host lists and the allocation's environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.config.load import load_testbed
from r2bench.config.testbed import LauncherKind
from r2bench.testbeds.slurm import (
    MAX_HOSTS,
    SlurmError,
    expand_nodelist,
    expand_tasks_per_node,
    read_allocation,
    slurm_testbed,
)


def compress(prefix: str, numbers: list[int], width: int) -> str:
    """A host list in Slurm's bracket form, ranges merged (as `scontrol show hostlist` does)."""
    numbers = sorted(set(numbers))
    pieces, start = [], 0
    for i in range(1, len(numbers) + 1):
        if i == len(numbers) or numbers[i] != numbers[i - 1] + 1:
            low, high = numbers[start], numbers[i - 1]
            text = str(low).zfill(width)
            pieces.append(text if low == high else f"{text}-{str(high).zfill(width)}")
            start = i
    return f"{prefix}[{','.join(pieces)}]"


prefixes = st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z]", fullmatch=True)


ENV = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[01-02]",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_TASKS_PER_NODE": "8(x2)",
    "SLURM_GPUS_ON_NODE": "8",
}


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("gpu01", ["gpu01"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[8-11]", ["gpu8", "gpu9", "gpu10", "gpu11"]),
        ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("a[1-2],b3,c[5]", ["a1", "a2", "b3", "c5"]),
        ("rack[1-2]-gpu[01-02]", ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]),
        ("node[1-2].ib", ["node1.ib", "node2.ib"]),
        (" x[0-1] ", ["x0", "x1"]),
    ],
)
def test_expand(text: str, hosts: list[str]) -> None:
    assert expand_nodelist(text) == hosts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("gpu[01-03", "'[' without ']'"),
        ("gpu01-03]", "']' without '['"),
        ("gpu[3-1]", "goes down"),
        ("gpu[a-b]", "bad range"),
        ("gpu[[1]]", "nested"),
        ("a,,b", "empty host name"),
        ("[1-2]", "starts with '['"),
        ("gpu[]", "bad range"),
        ("n[0-999999]", "more than"),
    ],
)
def test_expand_rejects(text: str, message: str) -> None:
    with pytest.raises(SlurmError, match=re.escape(message)):
        expand_nodelist(text)


@given(prefixes, st.lists(st.integers(0, 400), min_size=1, max_size=40), st.integers(1, 4))
def test_expand_inverts_compression(prefix: str, numbers: list[int], width: int) -> None:
    expected = [f"{prefix}{str(n).zfill(width)}" for n in sorted(set(numbers))]
    assert expand_nodelist(compress(prefix, numbers, width)) == expected


@given(st.lists(st.tuples(prefixes, st.lists(st.integers(0, 99), min_size=1, max_size=5)),
                min_size=1, max_size=5))  # fmt: skip
def test_groups_concatenate(groups: list[tuple[str, list[int]]]) -> None:
    text = ",".join(compress(p, nums, 2) for p, nums in groups)
    expected = [f"{p}{n:02d}" for p, nums in groups for n in sorted(set(nums))]
    assert expand_nodelist(text) == expected


@given(st.text(alphabet="ab01[]-,", max_size=20))
def test_garbage_raises_slurm_error_or_expands(text: str) -> None:
    try:
        hosts = expand_nodelist(text)
    except SlurmError:
        return
    assert hosts and all(h and "[" not in h and "]" not in h and "," not in h for h in hosts)


def test_tasks_per_node() -> None:
    assert expand_tasks_per_node("8(x2),4") == [8, 8, 4]
    assert expand_tasks_per_node("1") == [1]
    with pytest.raises(SlurmError):
        expand_tasks_per_node("8(2)")


def test_allocation_to_testbed() -> None:
    testbed = slurm_testbed(ENV)
    assert testbed.name == "slurm-4242"
    assert [(n.name, n.address, n.gpus) for n in testbed.nodes] == [
        ("gpu01", "gpu01", 8),
        ("gpu02", "gpu02", 8),
    ]
    assert testbed.launcher.kind is LauncherKind.SRUN
    assert "tasks per node 8" in testbed.description


@pytest.mark.parametrize(
    ("env", "gpus"),
    [
        ({"SLURM_GPUS_PER_NODE": "h100:4"}, 4),
        ({"SLURM_GPUS_PER_NODE": "2"}, 2),
        ({"SLURM_JOB_GPUS": "0,1,2"}, 3),
        ({}, None),
    ],
)
def test_gpu_sources(env: dict[str, str], gpus: int | None) -> None:
    base = {"SLURM_JOB_NODELIST": "n1", **env}
    assert read_allocation(base).gpus == gpus


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "SLURM_JOB_NODELIST is not set"),
        ({"SLURM_JOB_NODELIST": "a[1-2]", "SLURM_JOB_NUM_NODES": "3"}, "has 2 hosts"),
        ({"SLURM_JOB_NODELIST": "a[1-2]", "SLURM_TASKS_PER_NODE": "4"}, "covers 1 nodes"),
        ({"SLURM_JOB_NODELIST": "a1,a1"}, "twice"),
        ({"SLURM_JOB_NODELIST": "a1", "SLURM_GPUS_ON_NODE": "x"}, "not a number"),
    ],
)
def test_bad_allocation(env: dict[str, str], message: str) -> None:
    with pytest.raises(SlurmError, match=message):
        read_allocation(env)


def test_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in list(__import__("os").environ) if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    runner = CliRunner()
    result = runner.invoke(app, ["testbed", "from-slurm"])  # main reports it: exit 2
    assert isinstance(result.exception, SlurmError) and result.exception.exit_code == 2
    assert "SLURM_JOB_NODELIST is not set" in str(result.exception)
    for key, value in {**ENV, "SLURM_JOB_NODELIST": "gpu[01-03,07]", "SLURM_JOB_NUM_NODES": "4",
                       "SLURM_TASKS_PER_NODE": "8(x4)"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    out = tmp_path / "slurm.yaml"
    result = runner.invoke(app, ["testbed", "from-slurm", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    testbed = load_testbed(out)
    assert [n.name for n in testbed.nodes] == ["gpu01", "gpu02", "gpu03", "gpu07"]


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
