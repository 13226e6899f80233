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
from llamay.gguf import Typed, ValueType
from llamay.models.registry import FAMILIES
from llamay.models.tensors import ROLES, Dims, layer_roles, name_of

# Tensors a real file keeps in float32 whatever its type: convert_hf_to_gguf.py writes the
# router so, and llama-quantize leaves it (and every vector) as it is; BERT's token types too
# (llama.cpp adds their row to float32 embeddings, which ggml cannot do from F16).
_ALWAYS_F32 = ("ffn_gate_inp", "token_types")

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


# WordPiece's special tokens at the ids BERT's vocabulary has them (llama.cpp's WPM defaults)
_WPM_SPECIALS = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"}


def wordpiece_vocabulary(pieces: Sequence[str]) -> dict[str, Any]:
    """The metadata of a WordPiece vocabulary (tokenizer.ggml.model = bert) as llama.cpp's
    converter writes one: [PAD] 0, [unused1..99], [UNK] 100, [CLS] 101 (BOS), [SEP] 102,
    [MASK] 103, then `pieces` (a word's first piece led by U+2581, continuations bare), and
    two token types."""
    tokens = [_WPM_SPECIALS.get(i, f"[unused{i}]") for i in range(104)] + list(pieces)
    types = [_CONTROL if i in _WPM_SPECIALS else _UNKNOWN for i in range(104)]
    types[100] = _UNKNOWN
    types += [_NORMAL] * len(pieces)
    return {
        "tokenizer.ggml.model": "bert",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": np.array(types, dtype=np.int32),
        "tokenizer.ggml.token_type_count": 2,
        "tokenizer.ggml.bos_token_id": 101,
        "tokenizer.ggml.seperator_token_id": 102,  # sic: the GGUF key is spelled so
        "tokenizer.ggml.unknown_token_id": 100,
        "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.mask_token_id": 103,
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
    n_expert: int = 0,
    n_expert_used: int = 0,
    n_ff_exp: int | None = None,
    n_ff_shexp: int | None = None,
    output: bool | None = None,
    n_cls_out: int = 0,
) -> Path:
    """A random model of architecture `arch` with every tensor a file of its family has
    (models/tensors.py: the table the loader reads by), biases where the family has them,
    matrices of `weight_type` (quantized by the writer), norms, biases and the router in F32,
    the `vocab` metadata (see `vocabulary`), the family's example metadata, and `metadata` on
    top.

    Mixture-of-experts families get `n_expert` experts (the family's default: 8), of which
    `n_expert_used` (2) run per token, each `n_ff_exp` wide (n_ff where the family keeps the
    expert width in feed_forward_length); a shared expert of `n_ff_shexp` (n_ff) where the
    family has one (Granite's only when n_ff_shexp is given). `output`: whether to write
    output.weight (default: unless the family ties it to the embeddings).

    Encoders (BERT) get token types, their embeddings' norm, learned positions where the family
    has them, attention.causal = false and pooling_type mean (unless `metadata` says another);
    `n_cls_out` > 0 adds a reranker's classification head (cls, cls.output of n_cls_out rows)."""
    family = FAMILIES[arch]
    experts = family.experts
    if experts is not None and not (experts.optional and n_expert == 0):
        n_expert, n_expert_used = n_expert or 8, n_expert_used or 2
        n_ff_exp = n_ff if experts.n_ff_key is None else (n_ff_exp or n_ff)
        # Qwen 2 MoE always has its shared expert (n_ff wide by default); Granite only when
        # the file gives it a width
        shared = experts.shared == "gated" or (experts.shared == "plain" and bool(n_ff_shexp))
        n_ff_shexp = (n_ff_shexp or n_ff) if shared else 0
    else:
        n_expert, n_ff_exp, n_ff_shexp, shared = 0, 0, 0, False
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
        n_expert=n_expert,
        n_ff_exp=n_ff_exp or 0,
        n_ff_shexp=n_ff_shexp or 0,
        n_pos=context_length,
        n_cls_out=n_cls_out or 1,
    )

    def random(role: str, scale: float = 0.25) -> Any:
        shape = dims.resolve(ROLES[role].shape)
        if role == "attn_sinks":  # logits of the same order as the attention scores
            return (0.5 + rng.standard_normal(shape)).astype(np.float32)
        if role == "ffn_gate_inp_shexp":  # a matrix row: sigmoid(w . x) of order one
            return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
        if len(shape) == 1:
            return (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
        # Scaled so that activations stay of order one through the layers.
        cols = shape[-1]
        w = (rng.standard_normal(shape) * scale / np.sqrt(cols) * 4).astype(np.float32)
        return w if weight_type == "F32" or role in _ALWAYS_F32 else (weight_type, w)

    def bias(role: str) -> np.ndarray:
        # one value per output row: every dimension of the role's shape but the last (a
        # norm's: one per value)
        shape = ROLES[role].shape
        rows = dims.resolve(shape if len(shape) == 1 else shape[:-1])
        return (0.1 * rng.standard_normal(rows)).astype(np.float32)

    tensors: dict[str, Any] = {name_of(family, "token_embd"): random("token_embd", 1.0)}
    if family.output_norm:
        tensors[name_of(family, "output_norm")] = random("output_norm")
    encoder_meta: dict[str, Any] = {}
    if not family.causal:
        tensors[name_of(family, "token_types")] = random("token_types", 0.25)
        if family.positions == "absolute":
            tensors[name_of(family, "position_embd")] = random("position_embd", 0.25)
        encoder_meta = {f"{arch}.attention.causal": False, f"{arch}.pooling_type": 1}
    if family.embedding_norm:
        tensors[name_of(family, "token_embd_norm")] = random("token_embd_norm")
        tensors[name_of(family, "token_embd_norm", None, "bias")] = bias("token_embd_norm")
    # an encoder has no output matrix (its output is the hidden state)
    if (not family.output_is_embedding and family.causal) if output is None else output:
        tensors[name_of(family, "output")] = random("output")
    expert_biases = experts is not None and experts.biases
    for il in range(n_layer):
        for role in layer_roles(family, n_expert > 0, shared):
            tensors[name_of(family, role, il)] = random(role)
            moe_role = role == "ffn_gate_inp" or role.endswith("_exps")
            if role in family.biases or (expert_biases and moe_role):
                tensors[name_of(family, role, il, "bias")] = bias(role)
    if n_cls_out:
        for role in ("cls", "cls_output"):
            tensors[name_of(family, role)] = random(role)
            tensors[name_of(family, role, None, "bias")] = bias(role)
        encoder_meta[f"{arch}.pooling_type"] = 4  # rank
    eps_key = "layer_norm_epsilon" if family.norm == "layer" else "layer_norm_rms_epsilon"
    moe_meta: dict[str, Any] = {}
    if n_expert:
        moe_meta = {f"{arch}.expert_count": n_expert, f"{arch}.expert_used_count": n_expert_used}
        if experts.n_ff_key is not None:
            moe_meta[f"{arch}.{experts.n_ff_key}"] = n_ff_exp
        if shared:
            moe_meta[f"{arch}.expert_shared_feed_forward_length"] = n_ff_shexp
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
        f"{arch}.attention.{eps_key}": 1e-6 if family.norm == "rms" else 1e-5,
        **moe_meta,
        **encoder_meta,
        **{f"{arch}.{key}": value for key, value in family.example_metadata.items()},
        **vocab,
        **(metadata or {}),
    }
    return gguf.write(path, {key: _typed(value) for key, value in meta.items()}, tensors)


def _typed(value: Any) -> Any:
    """Counts, lengths and token ids as the UINT32 that real files (and llama.cpp's loader,
    which checks) have; everything else as the writer types it (FLOAT32, BOOL, STRING...)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 32:
        return Typed(value, ValueType.UINT32)
    return value


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


def requantize(
    source: str | os.PathLike[str],
    path: str | os.PathLike[str],
    weight_type: str,
    types: dict[str, str] | None = None,
) -> Path:
    """The model in `source` with its weight matrices (and experts) quantized to `weight_type`
    from their values there, as llama-quantize does with a pure type: vectors, biases, and what
    real files keep in float32 (the router), stay as they are; `types` names a type per tensor
    instead (a mixture such as Q4_K_M: the types llama-quantize chose). The metadata is copied
    with its types, general.file_type set to `weight_type`'s llama_ftype.

    From an F16 file this gives the tensor bytes llama-quantize gives: Q8_0, Q4_K, Q5_K, Q6_K,
    Q5_0 and MXFP4 are ggml's quantizers without an importance matrix (tests/data/families
    checks it)."""
    gg = gguf.read(source)
    tensors: dict[str, Any] = {}
    for name, t in gg.tensors.items():
        role = name.rsplit(".", 2)[-2]
        keep = len(t.shape) == 1 or not name.endswith(".weight") or role in _ALWAYS_F32
        target = types.get(name, t.type) if types is not None else (t.type if keep else weight_type)
        tensors[name] = t if target == t.type else (target, t.dequantize())
    metadata = gg.typed_metadata()
    metadata["general.file_type"] = Typed(FILE_TYPES[weight_type], ValueType.UINT32)
    return gguf.write(path, metadata, tensors)


# llama_ftype (llama.h), for general.file_type
FILE_TYPES = {
    "F32": 0,
    "F16": 1,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q5_1": 9,
    "Q4_K": 14,  # a pure Q4_K file is what llama-quantize --pure Q4_K_S writes
    "Q4_K_M": 15,
    "Q5_K": 16,  # the same, Q5_K_S
    "Q6_K": 18,
    "MXFP4_MOE": 38,
}
