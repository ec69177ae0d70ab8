"""The GPT-2 shapes the PyTorch training workload trains (pure: no torch, no I/O).

nanoGPT's GPT-2: token and position embeddings, `layers` pre-norm blocks (causal self-attention
with one fused query/key/value projection, a 4x MLP with GELU), a final LayerNorm, and the output
head tied to the token embedding. Every linear layer and LayerNorm has a bias. The vocabulary of
the 124M preset is GPT-2's 50257 padded to 50304 (a multiple of 64), as nanoGPT and R-2CCL's
training test use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GptShape:
    """One model size."""

    layers: int
    heads: int
    width: int
    """The embedding width (n_embd); a multiple of `heads`."""
    vocab: int
    block: int
    """The longest sequence (the position embedding's rows)."""

    @property
    def parameters(self) -> int:
        """Distinct parameters (the tied head counted once): every one is reduced each update."""
        c = self.width
        per_block = 12 * c * c + 13 * c  # attention 4c^2+4c, MLP 8c^2+5c, two LayerNorms 4c
        return self.vocab * c + self.block * c + self.layers * per_block + 2 * c


PRESETS: dict[str, GptShape] = {
    "gpt2-124m": GptShape(layers=12, heads=12, width=768, vocab=50304, block=1024),
    "gpt2-6l": GptShape(layers=6, heads=12, width=768, vocab=50304, block=1024),
    "gpt2-tiny": GptShape(layers=2, heads=2, width=128, vocab=4096, block=1024),
}


def preset(name: str) -> GptShape:
    """The shape called `name`; ValueError naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join(PRESETS)
        raise ValueError(f"--model {name!r} is not a GPT preset: use one of {known}") from None
