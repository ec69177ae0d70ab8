"""A small language model in numpy: what the emulated training job trains (pure, no I/O).

Next-token prediction on a token stream: the embeddings of the `context` tokens before each
position, concatenated, go through one tanh layer to the vocabulary's logits; softmax
cross-entropy loss; gradients by hand; Adam. Everything is float32 and every operation runs in a
fixed order, so two runs from the same seed give bit-identical losses and parameters as long as
their gradients are bit-identical: the property the training checks test, here as on a GPU.

The data is a seeded synthetic stream with structure to learn (a sparse random Markov chain over
the vocabulary), each rank its own shard, or a user's file of uint16 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

F32 = np.float32


@dataclass(frozen=True)
class Preset:
    """A model size: vocabulary, embedding width, context tokens, hidden width."""

    vocab: int
    embed: int
    context: int
    hidden: int

    @property
    def parameters(self) -> int:
        """Number of parameters (every one is reduced each update)."""
        v, e, c, h = self.vocab, self.embed, self.context, self.hidden
        return v * e + c * e * h + h + h * v + v


PRESETS = {
    "tiny": Preset(vocab=256, embed=32, context=4, hidden=128),  # 58k parameters, 230 KB
    "small": Preset(vocab=1024, embed=64, context=8, hidden=512),  # 0.85M parameters, 3.4 MB
}

NAMES = ("embedding", "w_hidden", "b_hidden", "w_out", "b_out")


@dataclass
class Model:
    """The parameters, in one contiguous float32 vector (so the gradient is one bucket), with
    named views into it."""

    preset: Preset
    flat: np.ndarray
    views: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def init(cls, preset: Preset, seed: int) -> Model:
        """Seeded initialisation, the same on every rank."""
        rng = np.random.default_rng(seed)
        model = cls(preset, np.zeros(preset.parameters, F32))
        model.views = _views(model.flat, preset)
        v = model.views
        v["embedding"][:] = rng.standard_normal(v["embedding"].shape, F32) * F32(0.1)
        fan_in = preset.context * preset.embed
        v["w_hidden"][:] = rng.standard_normal(v["w_hidden"].shape, F32) / F32(np.sqrt(fan_in))
        v["w_out"][:] = rng.standard_normal(v["w_out"].shape, F32) / F32(np.sqrt(preset.hidden))
        return model


def _views(flat: np.ndarray, p: Preset) -> dict[str, np.ndarray]:
    shapes = {
        "embedding": (p.vocab, p.embed),
        "w_hidden": (p.context * p.embed, p.hidden),
        "b_hidden": (p.hidden,),
        "w_out": (p.hidden, p.vocab),
        "b_out": (p.vocab,),
    }
    out, offset = {}, 0
    for name in NAMES:
        size = int(np.prod(shapes[name]))
        out[name] = flat[offset : offset + size].reshape(shapes[name])
        offset += size
    return out


def loss_and_grad(model: Model, tokens: np.ndarray, grad: np.ndarray) -> float:
    """Mean cross-entropy of predicting each token of `tokens` (batch x (context + 1)) from the
    `context` before it; the gradient is written into `grad` (flat, like the model). float32."""
    p, v = model.preset, model.views
    g = _views(grad, p)
    inputs, targets = tokens[:, : p.context], tokens[:, p.context]
    n = len(targets)
    x = v["embedding"][inputs].reshape(n, p.context * p.embed)
    h = np.tanh(x @ v["w_hidden"] + v["b_hidden"])
    logits = h @ v["w_out"] + v["b_out"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    loss = -np.log(probs[np.arange(n), targets] + F32(1e-12)).mean(dtype=F32)
    d_logits = probs
    d_logits[np.arange(n), targets] -= F32(1)
    d_logits /= F32(n)
    g["w_out"][:] = h.T @ d_logits
    g["b_out"][:] = d_logits.sum(axis=0)
    d_h = (d_logits @ v["w_out"].T) * (F32(1) - h * h)
    g["w_hidden"][:] = x.T @ d_h
    g["b_hidden"][:] = d_h.sum(axis=0)
    d_x = (d_h @ v["w_hidden"].T).reshape(n, p.context, p.embed)
    g["embedding"][:] = 0
    np.add.at(g["embedding"], inputs, d_x)  # in a fixed order: deterministic
    return float(loss)


def loss_only(model: Model, tokens: np.ndarray) -> float:
    """The loss on `tokens` without a gradient (evaluation)."""
    scratch = np.empty_like(model.flat)
    return loss_and_grad(model, tokens, scratch)


@dataclass
class Adam:
    """Adam on the flat parameter vector, float32, every step in the same order."""

    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    step: int = 0
    m: np.ndarray | None = None
    v: np.ndarray | None = None

    def update(self, params: np.ndarray, grad: np.ndarray) -> None:
        """One step: `params -= lr * m_hat / (sqrt(v_hat) + eps)`."""
        if self.m is None or self.v is None:
            self.m, self.v = np.zeros_like(params), np.zeros_like(params)
        self.step += 1
        b1, b2 = F32(self.beta1), F32(self.beta2)
        self.m *= b1
        self.m += (F32(1) - b1) * grad
        self.v *= b2
        self.v += (F32(1) - b2) * grad * grad
        m_hat = self.m / F32(1 - self.beta1**self.step)
        v_hat = self.v / F32(1 - self.beta2**self.step)
        params -= F32(self.lr) * m_hat / (np.sqrt(v_hat) + F32(self.eps))


class TokenStream:
    """Batches of (context + 1)-token windows for one rank: synthetic (seeded Markov chain) or
    from a file of uint16 tokens (each rank reads its own part of it)."""

    def __init__(
        self, preset: Preset, seed: int, rank: int, ranks: int, data: Path | None = None
    ) -> None:
        self.preset = preset
        self.window = preset.context + 1
        if data is None:
            self.tokens = _markov_tokens(preset.vocab, seed, rank, length=1 << 16)
        else:
            self.tokens = _file_tokens(data, preset.vocab, rank, ranks, self.window)
        self.rng = np.random.default_rng([seed, rank])

    def batch(self, size: int) -> np.ndarray:
        """`size` windows at seeded random places (size x (context + 1), int64)."""
        starts = self.rng.integers(0, len(self.tokens) - self.window, size)
        return np.stack([self.tokens[s : s + self.window] for s in starts]).astype(np.int64)


def _markov_tokens(vocab: int, seed: int, rank: int, length: int) -> np.ndarray:
    """A token stream from a sparse random Markov chain: 4 likely successors per token (the same
    chain on every rank, `seed`'s), each rank its own walk."""
    chain = np.random.default_rng(seed)
    successors = chain.integers(0, vocab, size=(vocab, 4))
    walk = np.random.default_rng([seed, rank, 1])
    choice = walk.integers(0, 4, size=length)
    noise = walk.random(length) < 0.1
    random_next = walk.integers(0, vocab, size=length)
    out = np.empty(length, np.int64)
    token = int(walk.integers(0, vocab))
    for i in range(length):
        token = int(random_next[i]) if noise[i] else int(successors[token, choice[i]])
        out[i] = token
    return out


def _file_tokens(path: Path, vocab: int, rank: int, ranks: int, window: int) -> np.ndarray:
    tokens = np.memmap(path, dtype=np.uint16, mode="r")
    part = len(tokens) // ranks
    if part <= window:
        raise ValueError(
            f"{path}: {len(tokens)} tokens, too few for {ranks} ranks of {window}-token windows"
        )
    mine = np.asarray(tokens[rank * part : (rank + 1) * part], np.int64)
    if int(mine.max()) >= vocab:
        raise ValueError(
            f"{path}: token {int(mine.max())} is outside the model's vocabulary of {vocab}"
            " (use a larger --model or a file tokenised for it)"
        )
    return mine
