"""The PyTorch training workload's pure parts, without torch: flags, ranks, rendezvous, the GPT
shapes, the schedule, the token batches, the end line, and which NCCL served (maps, preload,
stubs.json, R2B_EXPECT_NCCL)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from r2bench.plan import build
from r2bench.setup.stubs import STUB_LIBRARY_NAME
from r2bench.workloads import ring_allreduce, servedlib
from r2bench.workloads.gpt import PRESETS, preset
from r2bench.workloads.stubsrecord import StubsRecord, read_record
from r2bench.workloads.train_data import BatchSpec, DataError, FileTokens, SyntheticTokens
from r2bench.workloads.train_format import TrainEnd, read_line
from r2bench.workloads.train_options import (
    EXIT_NET,
    EXIT_USAGE,
    UsageError,
    bucket_cap_mb,
    end_text,
    final_loss,
    learning_rate,
    mean_over_ranks,
    parse_options,
    ranks_from_env,
    rendezvous_from_env,
)
from r2bench.workloads.train_torch import main

FLAGS = ["--model", "gpt2-tiny", "--updates", "5", "--batch", "2", "--seq-len", "16"]
FLAGS += ["--seed", "7", "--lr", "0.001", "--dtype", "bf16", "--digest-every", "2"]


# ---- shapes and flags -----------------------------------------------------------------------
def test_gpt2_124m_has_nanogpts_parameter_count() -> None:
    # nanoGPT prints 123.69M for GPT-2 with vocab 50304, the position embedding left out.
    shape = preset("gpt2-124m")
    assert shape.parameters - shape.block * shape.width == 123_689_472
    assert preset("gpt2-6l").parameters == shape.parameters - 6 * (12 * 768**2 + 13 * 768)
    assert all(s.width % s.heads == 0 for s in PRESETS.values())


def test_the_contract_flags_parse() -> None:
    opts = parse_options([*FLAGS, "--bucket-mb", "64", "--data", "/d/tokens.u16"])
    assert (opts.model, opts.updates, opts.batch, opts.seq_len, opts.seed) == (
        "gpt2-tiny", 5, 2, 16, 7,
    )  # fmt: skip
    assert (opts.lr, opts.dtype, opts.digest_every, opts.bucket_mb) == (0.001, "bf16", 2, 64)
    assert opts.data == Path("/d/tokens.u16") and opts.log
    assert not parse_options([*FLAGS, "--no-log"]).log


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--model", "gpt3"], "not a GPT preset: use one of gpt2-124m"),
        (["--seq-len", "1025"], "--seq-len 1025: gpt2-tiny takes 2 to 1024"),
        (["--dtype", "fp8"], "--dtype fp8: use one of float32, bf16, fp16"),
        (["--updates", "0"], "--updates 0"),
        (["--lr", "nan"], "--lr nan"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_a_bad_flag_is_a_usage_error_naming_it(change: list[str], message: str) -> None:
    argv = [*FLAGS, *change]
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_options(argv)


def test_usage_errors_exit_6_before_torch_is_needed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*FLAGS, "--dtype", "fp8"]) == EXIT_USAGE
    assert "train_torch: --dtype fp8" in capsys.readouterr().err


def test_exit_codes_are_the_emulated_workloads() -> None:
    assert (EXIT_NET, EXIT_USAGE) == (ring_allreduce.EXIT_NET, ring_allreduce.EXIT_USAGE)
    assert servedlib.EXPECT_VAR == build.EXPECT_NCCL_VAR


# ---- ranks and rendezvous -------------------------------------------------------------------
def test_ranks_come_from_open_mpi_first_then_torchrun() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}
    env |= {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "RANK": "0", "WORLD_SIZE": "9"}
    ranks = ranks_from_env(env)
    assert (ranks.rank, ranks.world, ranks.local) == (3, 4, 1)
    ranks = ranks_from_env({"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0"})
    assert (ranks.rank, ranks.world, ranks.local) == (2, 3, 0)
    with pytest.raises(UsageError, match="launch with mpirun"):
        ranks_from_env({})
    with pytest.raises(UsageError, match="outside"):
        ranks_from_env({"RANK": "3", "WORLD_SIZE": "3"})


def test_rendezvous_is_master_addr_and_port_when_both_are_set() -> None:
    assert rendezvous_from_env({"MASTER_ADDR": "10.10.1.1", "MASTER_PORT": "29561"}) == (
        "10.10.1.1",
        29561,
    )
    assert rendezvous_from_env({"MASTER_ADDR": "10.10.1.1"}) is None
    with pytest.raises(UsageError, match="MASTER_PORT='http'"):
        rendezvous_from_env({"MASTER_ADDR": "h", "MASTER_PORT": "http"})


# ---- schedule and figures -------------------------------------------------------------------
def test_the_schedule_warms_up_then_decays_to_a_tenth() -> None:
    rates = [learning_rate(u, 1000, 6e-4) for u in range(1, 1001)]
    assert rates[0] == pytest.approx(6e-4 / 50) and rates[49] == pytest.approx(6e-4)
    assert rates[-1] == pytest.approx(6e-5)
    assert all(a >= b for a, b in itertools.pairwise(rates[49:]))
    assert learning_rate(1, 5, 1.0) == 1.0  # short jobs: a one-update warm-up


def test_one_bucket_holds_every_gradient_unless_told() -> None:
    assert bucket_cap_mb(497_903_616, None) * 2**20 > 497_903_616
    assert bucket_cap_mb(497_903_616, 25) == 25


def test_losses_are_averaged_exactly_and_the_end_line_reads_back() -> None:
    assert mean_over_ranks([1e16, 1.0, -1e16, 1.0]) == 0.5  # a naive sum gives 0.25 or 0
    assert final_loss([9.0] * 5 + [1.0] * 10) == 1.0 and final_loss([]) is None
    text = end_text(TrainEnd(updates=60, final_loss=2.5, eval_loss=2.75), 0.1234567)
    assert text.startswith("#train-end {") and '"mean_step_s": 0.123457' in text
    assert read_line(text) == TrainEnd(updates=60, final_loss=2.5, eval_loss=2.75)


# ---- batches ---------------------------------------------------------------------------------
def test_synthetic_batches_depend_on_seed_rank_and_update_only() -> None:
    spec = BatchSpec(batch=3, seq_len=32, vocab=500)
    one, two = SyntheticTokens(spec, 42), SyntheticTokens(spec, 42)
    batch = one.batch(1, 7)
    assert batch.shape == (3, 33) and batch.dtype == np.int64
    assert batch.min() >= 0 and batch.max() < 500
    assert np.array_equal(batch, two.batch(1, 7))
    assert not np.array_equal(batch, one.batch(0, 7))
    assert not np.array_equal(batch, one.batch(1, 8))
    assert not np.array_equal(one.eval_batch(), one.batch(0, 0))
    # Learnable: every token is one of its predecessor's BRANCHES successors.
    successors = one.successors[batch[:, :-1]]
    assert (successors == batch[:, 1:, None]).any(axis=2).all()


def test_file_batches_come_from_each_ranks_slice(tmp_path: Path) -> None:
    path = tmp_path / "tokens.u16"
    np.arange(10_000, dtype=np.uint16).tofile(path)
    spec = BatchSpec(batch=4, seq_len=8, vocab=50_304)
    rank0, rank1 = (FileTokens(spec, 1, path, rank, 2) for rank in (0, 1))
    # The last 5 % (500 tokens) is held out; each rank gets half of the rest.
    assert rank0.batch(0, 1).max() < 4750 <= rank1.batch(1, 1).min()
    assert rank1.batch(1, 1).max() < 9500 <= rank0.eval_batch().min()
    assert np.array_equal(rank0.eval_batch(), rank1.eval_batch())
    assert (np.diff(rank0.batch(0, 3), axis=1) == 1).all()  # whole windows of the file


def test_a_file_the_model_cannot_use_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tokens.u16"
    np.full(1000, 60_000, dtype=np.uint16).tofile(path)
    with pytest.raises(DataError, match=r"tokens.u16: token 60000 is outside .* 4096"):
        FileTokens(BatchSpec(2, 8, 4096), 1, path, 0, 1).batch(0, 1)
    with pytest.raises(DataError, match="fewer than one sequence"):
        FileTokens(BatchSpec(2, 512, 4096), 1, path, 0, 4)


# ---- the served library ---------------------------------------------------------------------
MAPS = """\
7f0000000000-7f0000001000 r--p 00000000 08:01 11 /opt/r2ccl/build/lib/libnccl.so.2.23.4
7f0000001000-7f0000002000 r-xp 00001000 08:01 11 /opt/r2ccl/build/lib/libnccl.so.2.23.4
7f0000003000-7f0000004000 rw-p 00000000 00:00 0
7f0000005000-7f0000006000 r-xp 00000000 08:01 12 /venv/nvidia/nccl/lib/libnccl.so.2
7f0000007000-7f0000008000 r-xp 00000000 08:01 13 /venv/torch/lib/libtorch_cuda.so
7f0000009000-7f000000a000 r-xp 00000000 08:01 14 /tmp/stubs/libr2bench-nccl-stubs.so
7f000000b000-7f000000c000 r-xp 00000000 08:01 15 /old/libnccl-net.so (deleted)
"""


def test_every_mapped_nccl_file_once_in_map_order() -> None:
    assert servedlib.mapped_nccl_files(MAPS) == (
        "/opt/r2ccl/build/lib/libnccl.so.2.23.4",
        "/venv/nvidia/nccl/lib/libnccl.so.2",
        "/old/libnccl-net.so",
    )


def test_the_preloaded_library_serves_else_the_only_one_mapped() -> None:
    mapped = ("/venv/nvidia/nccl/lib/libnccl.so.2", "/opt/r2ccl/build/lib/libnccl.so.2.23.4")
    preload = ["/opt/r2ccl/build/lib/libnccl.so.2.23.4", "/tmp/stubs/x.so"]
    assert servedlib.choose_served(mapped, preload) == mapped[1]
    assert servedlib.choose_served(mapped[:1], []) == mapped[0]
    assert servedlib.choose_served((), preload) == ""
    assert servedlib.preload_entries(" /a/x.so:/b/y.so  /c/z.so ") == [
        "/a/x.so",
        "/b/y.so",
        "/c/z.so",
    ]


def test_ncclgetversion_codes_read_as_versions() -> None:
    assert servedlib.version_text(22304) == "2.23.4"
    assert servedlib.version_text(22809) == "2.28.9"
    assert servedlib.version_text(2708) == "2.7.8"


def test_detect_reads_the_map_the_preload_and_the_stubs_record(tmp_path: Path) -> None:
    library = tmp_path / "build" / "libnccl.so.2.23.4"
    library.parent.mkdir()
    library.write_bytes(b"not ELF")
    (tmp_path / "build" / "libnccl.so.2").symlink_to(library.name)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    stub = str(stubs / STUB_LIBRARY_NAME)
    StubsRecord(("ncclCommShrink", "ncclAlltoAll"), "torch.so", str(library), stub).write(stubs)
    # A record beside the library that names another file says nothing about this one.
    StubsRecord(("ncclNope",), "torch.so", str(library), "other.so").write(library.parent)
    maps = tmp_path / "maps"
    maps.write_text(
        f"7f00-7f01 r-xp 0 08:01 12 /venv/libnccl.so.2\n7f02-7f03 r-xp 0 08:01 11 {library}\n"
    )
    env = {"LD_PRELOAD": f"{tmp_path}/build/libnccl.so.2 {stubs}/{STUB_LIBRARY_NAME}"}
    served = servedlib.detect(env, maps)
    assert served.path == str(library) and served.stubbed == ("ncclCommShrink", "ncclAlltoAll")
    assert served.version == ""  # not a real library: no version, no crash
    assert served.name == f"NCCL ({library})"
    # The expected file, named through its symlink, is the one that served; another is not.
    assert (
        servedlib.check_expected(served, {servedlib.EXPECT_VAR: env["LD_PRELOAD"].split()[0]})
        is None
    )
    problem = servedlib.check_expected(served, {servedlib.EXPECT_VAR: "/venv/libnccl.so.2"})
    assert problem is not None and str(library) in problem and "/venv/libnccl.so.2" in problem
    assert servedlib.check_expected(served, {}) is None


def test_a_stubs_record_reads_back_and_a_damaged_one_is_none(tmp_path: Path) -> None:
    record = StubsRecord((), "c.so", "p.so", "s.so")
    record.write(tmp_path)
    assert read_record(tmp_path) == record
    (tmp_path / "stubs.json").write_text('{"functions": "ncclX"}')
    assert read_record(tmp_path) is None
    assert read_record(tmp_path / "missing") is None


def test_rank_0_advertises_the_named_socket_interfaces_address() -> None:
    """A namespace node's host name resolves nowhere: the store's address is that of the
    interface named for Gloo or NCCL sockets, when this host has it."""
    from r2bench.workloads.train_options import advertised_address, interface_names

    assert interface_names({"NCCL_SOCKET_IFNAME": "=nic0,nic1"}) == ["nic0", "nic1"]
    assert interface_names({"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "x"}) == ["lo"]
    assert interface_names({"NCCL_SOCKET_IFNAME": "^docker"}) == []
    assert advertised_address({"NCCL_SOCKET_IFNAME": "nosuchnic,lo"}) == "127.0.0.1"
    import socket

    assert advertised_address({}) == socket.gethostname()
