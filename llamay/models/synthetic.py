"""Small models with random weights, written as GGUF files: every tensor a family uses, in
shapes of our choosing, from a fixed seed.

`llamay verify` runs its determinism checks on `write_builtin` when given no model; the tests
hold the CPU backend to the float64 reference backend on the same kind of file
(tests/helpers/tiny.py).
The weights mean nothing, so the logits mean nothing; what such a model proves is that the
engine computes the same bits whatever the threads, batches, forks and snapshots around it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llamay import gguf
from llamay.models.registry import FAMILIES
from llamay.models.tensors import ROLES, Dims, layer_roles, name_of

# llama_token_type values
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6
SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1 (BOS), 2 (EOS)


def vocabulary(pieces: Sequence[str], *, byte_fallback: bool = False) -> dict[str, Any]:
    """The metadata of a SentencePiece vocabulary: <unk>, <s>, </s>, with byte_fallback the
    256 tokens <0x00>..<0xFF> (so that any text tokenizes), then `pieces`; every score 0."""
    bytes_ = [f"<0x{b:02X}>" for b in range(256)] if byte_fallback else []
    tokens = [*SPECIALS, *bytes_, *pieces]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * len(bytes_) + [_NORMAL] * len(pieces)
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": np.zeros(len(tokens), dtype=np.float32),
        "tokenizer.ggml.token_type": np.array(types, dtype=np.int32),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }


def write_model(
    path: str | os.PathLike[str],
    arch: str,
    vocab: dict[str, Any],
    *,
    n_embd: int,
    n_ff: int,
    n_layer: int,
    n_head: int,
    n_head_kv: int,
    head_dim: int,
    context_length: int,
    weight_type: str = "F32",
    metadata: dict[str, Any] | None = None,
    seed: int = 0,
) -> Path:
    """A random model of architecture `arch` with every tensor a file of its family has
    (models/tensors.py: the table the loader reads by), biases where the family has them,
    matrices of `weight_type` (quantized by the writer), norms and biases in F32, the `vocab`
    metadata (see `vocabulary`), the family's example metadata, and `metadata` on top."""
    family = FAMILIES[arch]
    rng = np.random.default_rng(seed)
    dims = Dims(
        n_vocab=len(vocab["tokenizer.ggml.tokens"]),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=n_ff,
        n_rot=head_dim,
        fused_gate_up=family.fused_gate_up,
        qk_norm=family.qk_norm,
    )

    def random(role: str, scale: float = 0.25) -> Any:
        shape = dims.resolve(ROLES[role].shape)
        if not ROLES[role].is_matrix:
            return (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
        # Scaled so that activations stay of order one through the layers.
        rows, cols = shape
        w = (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols) * 4).astype(np.float32)
        return w if weight_type == "F32" else (weight_type, w)

    tensors: dict[str, Any] = {
        name_of(family, "token_embd"): random("token_embd", 1.0),
        name_of(family, "output_norm"): random("output_norm"),
    }
    if not family.output_is_embedding:
        tensors[name_of(family, "output")] = random("output")
    for il in range(n_layer):
        for role in layer_roles(family):
            tensors[name_of(family, role, il)] = random(role)
            if role in family.biases:
                (rows,) = dims.resolve(ROLES[role].shape[:1])
                bias = (0.1 * rng.standard_normal(rows)).astype(np.float32)
                tensors[name_of(family, role, il, "bias")] = bias
    meta = {
        "general.architecture": arch,
        f"{arch}.context_length": context_length,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.block_count": n_layer,
        f"{arch}.feed_forward_length": n_ff,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        **{f"{arch}.{key}": value for key, value in family.example_metadata.items()},
        **vocab,
        **(metadata or {}),
    }
    return gguf.write(path, meta, tensors)


# The built-in model's pieces: letters and a few common English pieces, so that text tokenizes
# into more than bytes; everything else falls back to the byte tokens.
_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
_BUILTIN_PIECES = [
    "▁",
    *_LETTERS,
    *(f"▁{c}" for c in _LETTERS),
    *("th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ou", "es", "or", "is"),
    *("▁th", "▁the", "▁an", "▁and", "▁of", "▁to", "▁in", "▁is", "▁it", "▁on", "▁at"),
]


def write_builtin(path: str | os.PathLike[str], seed: int = 0) -> Path:
    """The built-in synthetic model: Gemma 3 (five sliding layers of a 24-token window, then a
    global one; query/key norms; post-norms; tied output), grouped-query attention, Q8_0
    matrices so that the integer kernels run, and a byte-fallback vocabulary of 337 tokens;
    4 MB, written in well under a second. `seed` gives other weights of the same shapes."""
    return write_model(
        path,
        "gemma3",
        vocabulary(_BUILTIN_PIECES, byte_fallback=True),
        n_embd=256,
        n_ff=512,
        n_layer=6,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        context_length=256,
        weight_type="Q8_0",
        metadata={
            "general.name": "llamay synthetic",
            "gemma3.attention.sliding_window": 24,
            # Random tied embeddings make the last hidden state favour a few tokens by far;
            # a soft-cap keeps sampling at temperature 0.8 varied, so seeds tell apart.
            "gemma3.final_logit_softcapping": 8.0,
        },
        seed=seed,
    )
