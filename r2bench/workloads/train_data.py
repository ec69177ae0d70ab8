"""The PyTorch training workload's token batches (pure: numpy, reads only the data file).

Every batch is a function of (seed, rank, update) alone, so two runs of one job see the same
tokens whatever happened in between (a fault, a slow rank), and each rank has its own shard:

- synthetic (the default): a seeded sparse Markov chain over the vocabulary (each token has
  `BRANCHES` possible successors), so the model has something to learn and the loss falls from
  ln(vocab) towards ln(BRANCHES);
- a file of uint16 tokens (`--data`, e.g. GPT-2 BPE of WikiText-103, read with np.memmap): its
  last `HELD_OUT_SHARE` is held out for the evaluation loss, the rest cut into one contiguous
  slice per rank; each sequence starts at a seeded offset inside the rank's slice.

The evaluation batch is the same on every rank and never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

BRANCHES = 4
HELD_OUT_SHARE = 0.05
EVAL_STREAM = 1 << 30
"""The 'rank' the evaluation batch is drawn as (no real rank is this large)."""
_TABLE_STREAM = 0x7AB1E


@dataclass(frozen=True)
class BatchSpec:
    """What one batch looks like."""

    batch: int
    seq_len: int
    vocab: int


class DataError(ValueError):
    """A data file the job cannot use: the message names the file and the fix."""


class SyntheticTokens:
    """The seeded Markov stream: a successor table drawn from the seed, walks from (seed, rank,
    update)."""

    def __init__(self, spec: BatchSpec, seed: int) -> None:
        self.spec = spec
        self.seed = seed
        table_rng = np.random.default_rng([seed, _TABLE_STREAM])
        self.successors = table_rng.integers(0, spec.vocab, (spec.vocab, BRANCHES), np.int64)

    def batch(self, rank: int, update: int) -> np.ndarray:
        """(batch, seq_len + 1) int64 tokens: inputs are [:, :-1], targets [:, 1:]."""
        b, t = self.spec.batch, self.spec.seq_len
        rng = np.random.default_rng([self.seed, rank, update])
        tokens = np.empty((b, t + 1), np.int64)
        tokens[:, 0] = rng.integers(0, self.spec.vocab, b)
        choices = rng.integers(0, BRANCHES, (b, t))
        for i in range(t):
            tokens[:, i + 1] = self.successors[tokens[:, i], choices[:, i]]
        return tokens

    def eval_batch(self) -> np.ndarray:
        """The held-out batch: the same on every rank."""
        return self.batch(EVAL_STREAM, 0)


class FileTokens:
    """Sequences from a uint16 token file: each rank its own slice, the tail held out."""

    def __init__(self, spec: BatchSpec, seed: int, path: Path, rank: int, ranks: int) -> None:
        self.spec, self.seed, self.path = spec, seed, path
        try:
            tokens = np.memmap(path, dtype=np.uint16, mode="r")
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: cannot read it as uint16 tokens ({exc}): give --data a "
                            "file of little-endian uint16 token ids") from exc  # fmt: skip
        window = spec.seq_len + 1
        held = max(int(len(tokens) * HELD_OUT_SHARE), window)
        share = (len(tokens) - held) // ranks
        if share < window:
            raise DataError(
                f"{path}: {len(tokens)} tokens leave {share} per rank after the held-out "
                f"{held}, fewer than one sequence of {window}: give a larger file or a "
                "shorter --seq-len"
            )
        self.train = tokens[rank * share : (rank + 1) * share]
        self.held_out = tokens[len(tokens) - held :]

    def batch(self, rank: int, update: int) -> np.ndarray:
        """(batch, seq_len + 1) int64 tokens from this rank's slice."""
        return self._draw(self.train, [self.seed, rank, update])

    def eval_batch(self) -> np.ndarray:
        """Sequences from the held-out tail, the same on every rank."""
        return self._draw(self.held_out, [self.seed, EVAL_STREAM, 0])

    def _draw(self, tokens: np.ndarray, key: list[int]) -> np.ndarray:
        window = self.spec.seq_len + 1
        starts = np.random.default_rng(key).integers(0, len(tokens) - window + 1, self.spec.batch)
        out = np.stack([np.asarray(tokens[s : s + window], np.int64) for s in starts])
        if int(out.max()) >= self.spec.vocab:
            raise DataError(
                f"{self.path}: token {int(out.max())} is outside the model's vocabulary of "
                f"{self.spec.vocab}: tokenise for this model or pick a preset with a larger one"
            )
        return out


def token_source(
    spec: BatchSpec, seed: int, data: Path | None, rank: int, ranks: int
) -> SyntheticTokens | FileTokens:
    """The batches of this rank: from `data`, or synthetic when it is None."""
    if data is None:
        return SyntheticTokens(spec, seed)
    return FileTokens(spec, seed, data, rank, ranks)
