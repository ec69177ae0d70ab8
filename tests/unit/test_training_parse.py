"""Reading a training workload's log: its `#train...` lines on stdout (under a launcher's prefix
or not), in update order, each update once; the stubs a job called, from stderr."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from r2bench.parse.training import STUB_LINE, called_stubs, parse_training, read_training
from r2bench.setup import stubs
from r2bench.workloads.train_format import UpdateLine, read_line
from tests.support.training_runs import TrainingText, base_loss


def test_a_log_read_whole_under_mpiruns_prefix() -> None:
    text = "\n".join(TrainingText(updates=30).lines())
    log = parse_training(text)
    assert log is not None and log.complete
    assert log.start is not None and log.start.updates == 30 and log.start.ranks == 2
    assert log.planned == 30 and log.last_update == 30 and log.progress() == "30 of 30 updates"
    assert list(log.updates.update) == list(range(1, 31))
    first = log.updates[0]
    assert first.update == 1 and first.loss == base_loss(1) and first.tokens_per_s == 512 / 0.05
    tenth = log.updates[9]
    assert tenth.digest is not None and tenth.digest.startswith("0000000a")
    assert tenth.digests_agree is True and log.updates[8].digest is None
    assert log.end is not None and log.end.eval_loss == 2.5
    assert log.stubs == () and log.unreadable == 0 and log.repeated == 0


def test_no_training_line_is_none() -> None:
    assert parse_training('# nccl-tests version 2.19.6\n#iter {"iter": 0}\n') is None
    assert parse_training("we are #training a model\n") is None
    assert parse_training(b"") is None


def test_repeated_and_out_of_order_updates_are_kept_once_in_update_order() -> None:
    lines = TrainingText(updates=5, repeat_update=2).lines()
    swapped = [*lines[:3], lines[4], lines[3], *lines[5:]]  # update 2 before update 1
    log = parse_training("\n".join(swapped))
    assert log is not None
    assert list(log.updates.update) == [1, 2, 3, 4, 5]
    assert log.repeated == 1
    assert log.updates[1].loss == base_loss(2)  # the first printed, not the later 99.0


def test_a_line_cut_short_is_counted_and_skipped() -> None:
    log = parse_training("\n".join(TrainingText(updates=10, logged=7, half_line=True).lines()))
    assert log is not None and not log.complete
    assert log.last_update == 6 and log.unreadable == 1
    assert log.progress() == "6 of 10 updates"


def test_a_null_loss_reads_back_as_none() -> None:
    line = UpdateLine(3, 1.0, 2.0, 1.0, math.inf, 10.0, None, 8).text()
    log = parse_training(line)
    assert log is not None and log.updates[0].loss is None and log.updates[0].grad_norm is None
    assert math.isnan(log.updates.loss[0])


def test_disagreeing_digests_name_the_first_update() -> None:
    log = parse_training("\n".join(TrainingText(updates=40, disagree_at=30).lines()))
    assert log is not None and log.disagreement == 30
    assert log.updates.index_of(30) == 29 and log.updates.index_of(31) == 30
    assert log.updates.index_of(0) is None and log.updates.index_of(41) is None


GOOD = {
    "update": 7, "start": 1.5, "end": 2, "step_s": 0.5, "loss": 4.25, "tokens_per_s": 100,
    "grad_norm": None, "allreduce_bytes": 64, "digest": "ab", "digests_agree": False,
    "lr": 0.1,
}  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"update": True},
        {"update": 1.0},
        {"update": 1 << 63},
        {"start": "1"},
        {"start": None},
        {"step_s": 10**400},
        {"loss": False},
        {"grad_norm": 1},
        {"allreduce_bytes": -5},
        {"digest": 3},
        {"digests_agree": 1},
        {"digest": None, "digests_agree": None},
        {"lr": None},
    ],
)
def test_an_update_line_reads_as_train_format_reads_it(change: dict[str, object]) -> None:
    """The fast reader of `#train` lines keeps `read_line`'s types and refusals."""
    text = "#train " + json.dumps({**GOOD, **change})
    log = parse_training(text)
    try:
        expected = read_line(text)
    except OverflowError:  # read_line cannot float() it: refused here
        expected = None
    got = log.updates[0] if log is not None and len(log.updates) else None
    assert got == expected


@pytest.mark.parametrize("missing", ["update", "start", "loss", "grad_norm", "allreduce_bytes"])
def test_an_update_line_without_a_required_key_is_unreadable(missing: str) -> None:
    doc = {k: v for k, v in GOOD.items() if k != missing}
    log = parse_training("#train " + json.dumps(doc))
    assert log is not None and len(log.updates) == 0 and log.unreadable == 1
    assert read_line("#train " + json.dumps(doc)) is None


def test_called_stubs_read_the_line_a_stub_writes() -> None:
    """This floor of the package cannot import `setup.stubs`: its pattern reads the same
    lines as the stubs' own (`CALLED_LINE`, `called_stubs`)."""
    assert STUB_LINE.pattern == stubs.CALLED_LINE.pattern
    stderr = (
        "node0:1:1 [0] NCCL INFO something\n"
        "[1,0]<stderr>:r2bench-nccl-stub: ncclCommShrink called: the NCCL under test "
        "(/opt/nccl-2.19/lib/libnccl.so.2) lacks it\n"
        "r2bench-nccl-stub: ncclCommRevoke called: the NCCL under test (/x) lacks it\n"
        "r2bench-nccl-stub: ncclCommShrink called: the NCCL under test (/x) lacks it\n"
    )
    assert called_stubs(stderr) == tuple(stubs.called_stubs(stderr))
    assert called_stubs(stderr.encode()) == ("ncclCommShrink", "ncclCommRevoke")
    assert called_stubs("") == () and called_stubs(None) == ()


def test_read_training_reads_the_run_folders_files(tmp_path: Path) -> None:
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    out.write_text("\n".join(TrainingText(updates=3).lines()))
    err.write_text("r2bench-nccl-stub: ncclCommShrink called: the NCCL under test (/x) lacks it\n")
    log = read_training(out, err)
    assert log is not None and log.stubs == ("ncclCommShrink",) and len(log.updates) == 3
    assert read_training(tmp_path / "absent.txt") is None
    out.write_text("# nccl-tests output only\n")
    assert read_training(out, err) is None
