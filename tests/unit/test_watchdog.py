"""The training job's watchdog: fires once on an update armed for too long (rank 0 prints the
`#train-abort` record first, the other ranks wait a grace so it gets out), never on updates that
complete, and exits with the timeout code."""

from __future__ import annotations

import threading

import pytest

from r2bench.workloads.train_format import TrainAbort, read_line
from r2bench.workloads.watchdog import OTHER_RANKS_GRACE_S, Watchdog


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch(rank: int, clock: FakeClock) -> tuple[Watchdog, list[int], threading.Event]:
    codes: list[int] = []
    fired = threading.Event()

    def exit_process(code: int) -> None:
        codes.append(code)
        fired.set()

    return Watchdog(5, rank, exit_process, clock).start(), codes, fired


def test_an_update_stalled_past_the_limit_aborts_with_exit_4(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    dog, codes, fired = _watch(0, clock)
    dog.arm(7)
    clock.now += 4.9
    assert not fired.wait(0.2)  # within the limit
    clock.now += 0.2
    assert fired.wait(2.0)
    assert codes == [4]
    out, err = capsys.readouterr()
    record = read_line(out.strip())
    assert isinstance(record, TrainAbort) and record.update == 7 and record.waited_s == 5.0
    assert "watchdog (rank 0): update 7's collective did not complete in 5 s" in err


def test_completed_updates_never_fire_and_other_ranks_wait_for_rank_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    dog, codes, fired = _watch(1, clock)
    for update in range(1, 4):
        dog.arm(update)
        clock.now += 4.0
        dog.disarm()
        clock.now += 100.0  # between updates nothing is watched
    assert not fired.wait(0.2)
    dog.arm(4)
    clock.now += 5.0 + OTHER_RANKS_GRACE_S - 0.1
    assert not fired.wait(0.2)  # rank 0 fires first
    clock.now += 0.2
    assert fired.wait(2.0) and codes == [4]
    assert "#train-abort" not in capsys.readouterr().out  # only rank 0 prints the record
    dog.stop()
