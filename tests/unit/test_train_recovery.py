"""The emulated training job's recovery pieces: checkpoints (atomic, verified, with a fallback),
the start counter, the shrink's agreement rule, and the recovery flags."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from r2bench.workloads import checkpoint
from r2bench.workloads.ring_allreduce import UsageError
from r2bench.workloads.shrink import FailureReport, failed_ranks, plan_shrink
from r2bench.workloads.train_emulated import parse_args


def state(update: int, ranks: int = 2) -> checkpoint.TrainState:
    rng = np.random.default_rng(update)
    streams = [dict(np.random.default_rng([7, r]).bit_generator.state) for r in range(ranks)]
    return checkpoint.TrainState(
        update, rng.standard_normal(50, np.float32), rng.standard_normal(50, np.float32),
        rng.random(50, np.float32), update, streams, [5.5, 5.25],
    )  # fmt: skip


def test_a_checkpoint_round_trips_bit_for_bit(tmp_path: Path) -> None:
    saved = state(10)
    path = checkpoint.save(tmp_path, saved)
    assert path == tmp_path / "ckpt-00000010.npz"
    back = checkpoint.read(path)
    assert back.update == 10 and back.adam_step == 10 and back.ranks == 2
    assert back.params.tobytes() == saved.params.tobytes()
    assert back.adam_v.tobytes() == saved.adam_v.tobytes()
    assert back.losses == [5.5, 5.25]
    gen = np.random.default_rng()
    gen.bit_generator.state = back.streams[1]
    assert gen.integers(0, 1 << 30) == np.random.default_rng([7, 1]).integers(0, 1 << 30)


def test_only_the_newest_two_are_kept_and_the_newest_is_loaded(tmp_path: Path) -> None:
    for update in (5, 10, 15):
        checkpoint.save(tmp_path, state(update))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["ckpt-00000010.npz", "ckpt-00000015.npz", "written"]
    assert (tmp_path / "written").read_text() == "ckpt-00000015.npz\n"
    loaded = checkpoint.load_newest(tmp_path, checkpoint.read)
    assert loaded is not None and loaded.state.update == 15 and loaded.skipped == ()


def test_checkpoints_gone_after_one_was_written_are_an_error_not_a_fresh_start(
    tmp_path: Path,
) -> None:
    assert checkpoint.load_newest(tmp_path, checkpoint.read) is None  # never written: a first start
    checkpoint.save(tmp_path, state(5))
    for written in tmp_path.glob("ckpt-*"):
        written.unlink()
    with pytest.raises(checkpoint.CheckpointError, match=r"ckpt-00000005\.npz that an earlier"):
        checkpoint.load_newest(tmp_path, checkpoint.read)


def test_any_reader_loads_through_the_same_fallback(tmp_path: Path) -> None:
    for update in (3, 6):
        target = checkpoint.checkpoint_path(tmp_path, update, ".pt")
        temp = checkpoint.temporary_path(target)
        temp.write_text(f"state {update}")
        checkpoint.publish(temp, target)

    def reader(path: Path) -> str:
        if path.name.endswith("6.pt"):
            raise ValueError(f"{path}: damaged")
        return path.read_text()

    loaded = checkpoint.load_newest(tmp_path, reader)
    assert loaded is not None and loaded.state == "state 3"
    assert loaded.skipped == (f"{tmp_path}/ckpt-00000006.pt: damaged",)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(
    tmp_path: Path, damage: str
) -> None:
    checkpoint.save(tmp_path, state(5))
    newest = checkpoint.save(tmp_path, state(10))
    data = bytearray(newest.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF  # inside the parameters' bytes: only the digest sees it
        newest.write_bytes(bytes(data))
    else:
        newest.write_bytes(bytes(data[: len(data) // 3]))
    loaded = checkpoint.load_newest(tmp_path, checkpoint.read)
    assert loaded is not None and loaded.state.update == 5
    assert len(loaded.skipped) == 1 and "ckpt-00000010.npz" in loaded.skipped[0]


def test_a_half_written_temporary_file_is_never_loaded(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, state(5))
    (tmp_path / ".ckpt-00000010.npz.123.tmp").write_bytes(b"PK\x03\x04 half")
    loaded = checkpoint.load_newest(tmp_path, checkpoint.read)
    assert loaded is not None and loaded.state.update == 5 and loaded.skipped == ()


def test_no_checkpoint_is_none_and_only_damaged_ones_is_an_error(tmp_path: Path) -> None:
    assert checkpoint.load_newest(tmp_path / "absent", checkpoint.read) is None
    assert checkpoint.load_newest(tmp_path, checkpoint.read) is None
    (tmp_path / "ckpt-00000003.npz").write_bytes(b"not a zip")
    with pytest.raises(checkpoint.CheckpointError, match=r"ckpt-00000003\.npz.*remove"):
        checkpoint.load_newest(tmp_path, checkpoint.read)


def test_the_start_counter_counts_up_from_one(tmp_path: Path) -> None:
    assert [checkpoint.next_attempt(tmp_path) for _ in range(3)] == [1, 2, 3]
    (tmp_path / checkpoint.ATTEMPTS_FILE).write_text("garbage")
    assert checkpoint.next_attempt(tmp_path) == 1


def reports(
    stalled: set[int], nodes: list[str], broken: frozenset[int] = frozenset()
) -> list[FailureReport]:
    return [FailureReport(r, node, r in stalled, r in broken) for r, node in enumerate(nodes)]


def test_a_single_stalled_sender_names_its_own_node() -> None:
    nodes = ["n0", "n1", "n2", "n3"]
    plan = plan_shrink(reports({1}, nodes))
    assert plan.possible and plan.failed_ranks == (1,)
    assert (plan.dropped, plan.survivors) == ((1,), (0, 2, 3))
    timed = [FailureReport(r, f"n{r}", r == 1, detected_at=100.0 + r) for r in range(3)]
    assert plan_shrink(timed).first_detected == 100.0  # the earliest rank's detection


def test_a_dead_link_stalls_both_ways_and_the_later_rank_is_the_failed_one() -> None:
    # Node 2's link is down: rank 1's sends into it stall, and so do rank 2's own.
    assert failed_ranks(reports({1, 2}, ["a", "b", "c", "d"])) == (2,)
    # The ring wraps: rank 3 -> rank 0.
    assert failed_ranks(reports({3, 0}, ["a", "b", "c", "d"])) == (0,)


def test_a_rank_whose_own_link_is_down_is_the_failed_one_whatever_stalled() -> None:
    """Node 1's link is down, but rank 1 was waiting to receive when the watchdog fired: only
    rank 0's sends into it stalled. The send rules alone would drop node 0; rank 1's own NIC
    is down (what the port's event tells a real job), and that decides."""
    nodes = ["n0", "n1", "n2"]
    assert failed_ranks(reports({0}, nodes)) == (0,)  # the stalls alone point the wrong way
    told = [FailureReport(r, nodes[r], r == 0, link_down=r == 1) for r in range(3)]
    plan = plan_shrink(told)
    assert plan.failed_ranks == (1,) and plan.survivors == (0, 2)


def test_a_broken_connection_names_the_left_neighbour_and_the_whole_node_is_dropped() -> None:
    nodes = ["x", "x", "y", "y"]  # two ranks per node
    plan = plan_shrink(reports(set(), nodes, broken=frozenset({2})))
    assert plan.failed_ranks == (1,)
    assert (plan.dropped, plan.survivors) == ((0, 1), (2, 3))


def test_a_shrink_that_leaves_nobody_or_names_nobody_is_refused() -> None:
    everyone = plan_shrink(reports({1}, ["vm", "vm", "vm"]))
    assert not everyone.possible and everyone.survivors == ()
    assert "vm" in everyone.reason and "0,1,2" in everyone.reason
    nothing = plan_shrink(reports(set(), ["a", "b", "c"]))
    assert not nothing.possible and "no failed node" in nothing.reason


BASE = ["--updates", "4"]


def test_recovery_flags_parse_and_disagreements_are_refused(tmp_path: Path) -> None:
    args = parse_args([*BASE, "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "3",
                       "--watchdog-s", "5", "--timeout-s", "9"])  # fmt: skip
    assert (args.checkpoint_dir, args.checkpoint_every, args.watchdog_s) == (tmp_path, 3, 5)
    assert args.collective_s == 5 and args.on_failure == "exit"
    with pytest.raises(UsageError, match="go together"):
        parse_args([*BASE, "--checkpoint-dir", str(tmp_path)])
    with pytest.raises(UsageError, match="go together"):
        parse_args([*BASE, "--checkpoint-every", "3"])
    with pytest.raises(UsageError, match="needs --watchdog-s"):
        parse_args([*BASE, "--on-failure", "shrink"])
    with pytest.raises(UsageError, match="--watchdog-s -1"):
        parse_args([*BASE, "--watchdog-s", "-1"])
    assert parse_args([*BASE, "--watchdog-s", "2", "--on-failure", "shrink"]).on_failure == "shrink"
