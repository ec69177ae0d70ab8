"""The emulated training job's model and its pure parts (r2bench.workloads.tinylm and
train_emulated's argument handling); the job under the real mpirun is in
tests/integration/test_train_emulated.py."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from r2bench.workloads import tinylm
from r2bench.workloads.ring_allreduce import UsageError
from r2bench.workloads.train_emulated import buckets, parse_args, parse_corrupt


def test_the_gradient_is_the_loss_slope() -> None:
    """Central differences on coordinates of every parameter block agree with the hand-made
    gradient (float32, so within a few percent)."""
    preset = tinylm.PRESETS["tiny"]
    model = tinylm.Model.init(preset, seed=3)
    batch = tinylm.TokenStream(preset, 42, 0, 1).batch(16)
    grad = np.empty_like(model.flat)
    tinylm.loss_and_grad(model, batch, grad)
    offsets = np.cumsum([0] + [v.size for v in model.views.values()])
    for start, end in pairwise(int(o) for o in offsets):
        block = grad[start:end]
        i = start + int(np.argmax(np.abs(block)))  # the steepest coordinate of the block
        old, eps = model.flat[i], np.float32(1e-2)
        model.flat[i] = old + eps
        up = tinylm.loss_only(model, batch)
        model.flat[i] = old - eps
        down = tinylm.loss_only(model, batch)
        model.flat[i] = old
        assert (up - down) / (2 * eps) == pytest.approx(grad[i], rel=0.05, abs=1e-4)


def test_training_learns_and_repeats_bit_for_bit() -> None:
    def train(seed: int) -> list[float]:
        preset = tinylm.PRESETS["tiny"]
        model, stream = tinylm.Model.init(preset, seed), tinylm.TokenStream(preset, seed, 0, 1)
        grad, opt, losses = np.empty_like(model.flat), tinylm.Adam(3e-3), []
        for _ in range(120):
            losses.append(tinylm.loss_and_grad(model, stream.batch(32), grad))
            opt.update(model.flat, grad)
        return losses

    first = train(7)
    assert first == train(7)  # deterministic: equal floats, not close ones
    assert first != train(8)
    assert np.mean(first[-10:]) < np.mean(first[:10]) - 0.5  # the Markov chain is learnt


def test_each_rank_reads_its_own_part_of_a_token_file(tmp_path: Path) -> None:
    data = tmp_path / "tokens.bin"
    np.arange(1000, dtype=np.uint16).tofile(data)
    preset = tinylm.PRESETS["small"]  # vocabulary 1024: every token fits
    ranks = [tinylm.TokenStream(preset, 1, r, 2, data) for r in range(2)]
    assert ranks[0].tokens.max() < 500 <= ranks[1].tokens.min()
    with pytest.raises(ValueError, match="outside the model's vocabulary of 256"):
        tinylm.TokenStream(tinylm.PRESETS["tiny"], 1, 1, 2, data)


def test_flags_are_checked_and_named() -> None:
    args = parse_args(["--model", "small", "--updates", "5", "--batch", "2", "--seq-len", "3"])
    assert (args.preset.parameters, args.positions) == (853504, 6)
    with pytest.raises(UsageError, match="--dtype bf16"):
        parse_args(["--dtype", "bf16"])
    with pytest.raises(UsageError, match="--updates 0"):
        parse_args(["--updates", "0"])
    assert parse_corrupt("12", ranks=4) == (12, 3)
    assert parse_corrupt("12:0", ranks=4) == (12, 0)
    with pytest.raises(UsageError, match="rank 0 to 3"):
        parse_corrupt("12:4", ranks=4)
    with pytest.raises(UsageError, match="UPDATE"):
        parse_corrupt("x", ranks=4)


def test_buckets_cover_the_gradient_in_order() -> None:
    assert buckets(10, None) == [slice(0, 10)]
    parts = buckets(600_000, 1)  # 1 MiB = 262,144 floats
    assert [(p.start, p.stop) for p in parts] == [(0, 262144), (262144, 524288), (524288, 600000)]
