"""Vocabularies and small models with fill-in-the-middle tokens, as code models carry them.

Qwen2.5-Coder files name their FIM tokens by text only (`<|fim_prefix|>`...); newer files have
the `tokenizer.ggml.fim_*_token_id` keys. `fim_model` writes both kinds from the trained
synthetic Qwen 2 model of tests/data/synth (peaked predictions, so a greedy middle depends on
what surrounds it): its vocabulary grows by the FIM tokens, its tied embedding matrix by one
row each.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llamay import gguf
from llamay.gguf import StringArray, Typed, ValueType
from llamay.models import synthetic

SYNTH_QWEN2 = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"
# Qwen2.5-Coder's FIM tokens, in the order of the roles pre, suf, mid, pad, rep, sep
QWEN_FIM = (
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
# Texts no loader recognises: a file with these must name them in its keys
UNNAMED_FIM = ("<fill-start>", "<fill-hole>", "<fill-end>")
_KEYS = ("fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep")
_CONTROL = 3


def _with_tokens(metadata: dict[str, Any], texts: Sequence[str], keys: bool) -> dict[str, Any]:
    """`metadata` with `texts` appended to its vocabulary as control tokens (named in the
    fim_*_token_id keys, in role order, when `keys`)."""
    tokens = list(metadata["tokenizer.ggml.tokens"])
    first = len(tokens)
    out = dict(metadata)
    out["tokenizer.ggml.tokens"] = StringArray.of([*tokens, *texts])
    types = np.asarray(metadata["tokenizer.ggml.token_type"], dtype=np.int32)
    out["tokenizer.ggml.token_type"] = np.concatenate(
        [types, np.full(len(texts), _CONTROL, np.int32)]
    )
    if "tokenizer.ggml.scores" in metadata:
        scores = np.asarray(metadata["tokenizer.ggml.scores"], dtype=np.float32)
        out["tokenizer.ggml.scores"] = np.concatenate([scores, np.zeros(len(texts), np.float32)])
    if keys:
        for i, role in enumerate(_KEYS[: len(texts)]):
            out[f"tokenizer.ggml.{role}_token_id"] = first + i
    return out


def spm_vocabulary(texts: Sequence[str] = (), keys: bool = False) -> dict[str, Any]:
    """A SentencePiece vocabulary that tokenizes any text (byte fallback) and, like Qwen's,
    asks for no BOS, with `texts` as control tokens after its pieces."""
    pieces = ["▁", *"abcdefghijklmnopqrstuvwxyz", "▁def", "▁return", "():", "▁x"]
    vocabulary = synthetic.vocabulary(pieces, byte_fallback=True)
    vocabulary["tokenizer.ggml.add_bos_token"] = False
    return _with_tokens(vocabulary, texts, keys)


def fim_model(path: Path, texts: Sequence[str] = QWEN_FIM, *, keys: bool = False) -> Path:
    """The synthetic Qwen 2 model with `texts` added as FIM tokens (see the module docstring);
    with `keys`, named in the tokenizer.ggml.fim_*_token_id keys."""
    source = gguf.read(SYNTH_QWEN2)
    metadata = _with_tokens(source.typed_metadata(), texts, keys)
    for role in _KEYS:  # token ids as real files type them
        key = f"tokenizer.ggml.{role}_token_id"
        if isinstance(metadata.get(key), int):
            metadata[key] = Typed(metadata[key], ValueType.UINT32)
    tensors: dict[str, Any] = dict(source.tensors)
    embeddings = source.tensors["token_embd.weight"].dequantize()
    rng = np.random.default_rng(7)
    scale = float(np.abs(embeddings).mean())
    rows = (rng.standard_normal((len(texts), embeddings.shape[1])) * scale).astype(np.float32)
    tensors["token_embd.weight"] = np.concatenate([embeddings, rows])
    return gguf.write(path, metadata, tensors)


def write_models(directory: Path) -> Path:
    """`coder.gguf` (FIM tokens named by text), `keyed.gguf` (by metadata keys) and
    `plain.gguf` (none) in `directory`, for a server's --models-dir."""
    fim_model(directory / "coder.gguf")
    fim_model(directory / "keyed.gguf", UNNAMED_FIM, keys=True)
    shutil.copy(SYNTH_QWEN2, directory / "plain.gguf")
    return directory
