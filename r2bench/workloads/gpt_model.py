"""nanoGPT's GPT-2 in plain PyTorch (imports torch: only the PyTorch workload imports this).

The shapes are `r2bench.workloads.gpt`'s. Attention is written out (matmul, causal mask,
softmax) rather than `scaled_dot_product_attention`: the fused kernels' backward passes are not
all deterministic, and the workload's checks compare runs bit for bit.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from r2bench.workloads.gpt import GptShape

INIT_STD = 0.02


class CausalSelfAttention(nn.Module):  # type: ignore[misc]
    """Multi-head causal self-attention with one fused q/k/v projection."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.heads = shape.heads
        self.c_attn = nn.Linear(shape.width, 3 * shape.width)
        self.c_proj = nn.Linear(shape.width, shape.width)
        mask = torch.tril(torch.ones(shape.block, shape.block, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, shape.block, shape.block), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, tokens, width) -> the same shape."""
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Mlp(nn.Module):  # type: ignore[misc]
    """width -> 4 x width -> GELU -> width."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.c_fc = nn.Linear(shape.width, 4 * shape.width)
        self.c_proj = nn.Linear(4 * shape.width, shape.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP of one block."""
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):  # type: ignore[misc]
    """One pre-norm transformer block."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(shape.width)
        self.attn = CausalSelfAttention(shape)
        self.ln_2 = nn.LayerNorm(shape.width)
        self.mlp = Mlp(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual attention, then residual MLP."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):  # type: ignore[misc]
    """GPT-2: embeddings, blocks, final LayerNorm, head tied to the token embedding."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab, shape.width)
        self.wpe = nn.Embedding(shape.block, shape.width)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.ln_f = nn.LayerNorm(shape.width)
        self.lm_head = nn.Linear(shape.width, shape.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2's: N(0, 0.02), residual projections scaled by 1/sqrt(2 x layers), zero biases.
        residual_std = INIT_STD / math.sqrt(2 * self.shape.layers)
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=residual_std)
            elif name.endswith(".bias"):
                nn.init.zeros_(param)
            elif param.dim() >= 2:
                nn.init.normal_(param, mean=0.0, std=INIT_STD)
        # LayerNorm weights keep their ones.

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean next-token cross-entropy of `tokens` against `targets` (both (batch, t))."""
        t = tokens.size(1)
        positions = torch.arange(t, device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def optimizer_groups(model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """nanoGPT's AdamW groups: weight decay on matrices and embeddings, none on biases and norms."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
