"""Tiny random models of every family, written as GGUF files, to hold the engine to the reference.

With F32 weights (and F32 KV in the engine) the engine quantizes nothing, so it must agree with
the float64 reference to fp32 rounding: a wrong RoPE variant, window, norm or soft-cap shows up
as an error of order one, far above that. Quantized files exercise the integer kernels. The
files come from llamay.models.synthetic, which also writes `llamay verify`'s built-in model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llamay.models import synthetic

N_VOCAB = 64
N_EMBD = 64
HEAD_DIM = 16
N_FF = 96
CONTEXT = 256


def vocabulary() -> dict[str, Any]:
    """A SentencePiece vocabulary of N_VOCAB tokens: <unk>, <s>, </s> and single letters."""
    pieces = [f"▁{chr(97 + i % 26)}{i // 26 or ''}" for i in range(N_VOCAB - 3)]
    return synthetic.vocabulary(pieces)


def write_tiny(
    path: Path,
    arch: str,
    *,
    n_layer: int = 3,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = HEAD_DIM,
    weight_type: str = "F32",
    metadata: dict[str, Any] | None = None,
    seed: int = 0,
    **options: Any,
) -> Path:
    """A random model of architecture `arch` with every tensor its family uses (biases on q/k/v
    for qwen2), weights of `weight_type`, extra `metadata` on top of the defaults; `options`
    go to synthetic.write_model (experts: n_expert, n_expert_used, n_ff_shexp...)."""
    return synthetic.write_model(
        path,
        arch,
        vocabulary(),
        n_embd=N_EMBD,
        n_ff=N_FF,
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        context_length=CONTEXT,
        weight_type=weight_type,
        metadata=metadata,
        seed=seed,
        **options,
    )
