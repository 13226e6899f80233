"""A model's blocks as a backend runs them: which GGUF tensor plays which part in each layer
(tensors.py's table, checked against the hyperparameters), and the per-layer `Block`
descriptor that the forward step reads (csrc/forward.h mirrors it field for field).

Every family shares this; the family file only declares what differs (family.py). Weight
matrices stay zero-copy views of the file; only the small vectors (norms, biases, RoPE factors)
are converted to float32 here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from llamay.errors import ModelFormatError
from llamay.gguf import GGUFFile, StringArray, Tensor
from llamay.models.family import ExpertActivation, Family, Gating, NormKind, QKNorm
from llamay.models.hparams import YARN_BETA_FAST, YARN_BETA_SLOW, HParams
from llamay.models.tensors import ROLES, Dims, name_of


@dataclass(frozen=True)
class Linear:
    """A weight matrix of n_rows outputs by n_cols inputs, as the file stores it, and its bias."""

    name: str
    tensor: Tensor
    n_rows: int
    n_cols: int
    bias: np.ndarray | None  # float32 (n_rows,)


@dataclass(frozen=True)
class ExpertLinear:
    """The experts' matrices of one projection: n_expert matrices of n_rows outputs by n_cols
    inputs, one after another in one tensor (GGUF shape (n_cols, n_rows, n_expert)), and their
    biases."""

    name: str
    tensor: Tensor
    n_expert: int
    n_rows: int
    n_cols: int
    bias: np.ndarray | None  # float32 (n_expert, n_rows)


@dataclass(frozen=True)
class Moe:
    """A mixture-of-experts FFN (llama.cpp's build_moe_ffn): the router scores the experts, the
    n_used best run on the token, and their outputs are summed in router-rank order (best first),
    each times its weight. A shared expert, where the layer has one, is the Block's dense FFN,
    added after (scaled by sigmoid(shared_gate . x) where there is a shared_gate)."""

    router: Linear  # n_expert rows
    gate: ExpertLinear
    up: ExpertLinear
    down: ExpertLinear
    n_expert: int
    n_used: int
    gating: Gating  # "softmax": softmax, then top k; "softmax_weight": top k, then softmax
    normalize: bool  # the chosen weights divided by their sum
    activation: ExpertActivation  # "silu" or gpt-oss's "swiglu_oai"
    shared_gate: Linear | None  # one row (Qwen 2 MoE)


@dataclass(frozen=True)
class Block:
    """One layer: its weights and the descriptor of how it computes.

    None for a norm means the layer has none there: no pre-norm (OLMo 2), no post-norm (Llama).
    gate, up and down are the dense FFN, or a mixture-of-experts layer's shared expert; all None
    where an expert layer has none.
    """

    attn_norm: np.ndarray | None
    q: Linear  # with fused_qkv: the rows [q; k; v]
    k: Linear | None
    v: Linear | None
    qk_norm: QKNorm  # "head": over each head; "projection": over all heads at once
    q_norm: np.ndarray | None
    k_norm: np.ndarray | None
    o: Linear
    post_attn_norm: np.ndarray | None
    ffn_norm: np.ndarray | None
    gate: Linear | None  # None with a fused [gate; up] in `up`
    up: Linear | None
    down: Linear | None
    post_ffn_norm: np.ndarray | None
    n_head: int
    n_head_kv: int
    n_ff: int  # of the dense FFN or the shared expert (0: none)
    window: int  # 0: attends to every earlier position
    rope: int  # index into ModelSpec.ropes, or -1 for a layer without RoPE (NoPE)
    residual_scale: float  # multiplies the attention and FFN outputs before each residual add
    # Cohere: the FFN reads attn_norm's output too, and x + ffn + attn is the layer's output.
    parallel: bool = False
    # gpt-oss: one logit per query head, in every softmax's denominator (float32 (n_head,)).
    sinks: np.ndarray | None = None
    moe: Moe | None = None
    # BERT: LayerNorms (weight, bias) of the stream after attention's residual add and after
    # the FFN's (None: none).
    attn_out_norm: tuple[np.ndarray, np.ndarray | None] | None = None
    layer_out_norm: tuple[np.ndarray, np.ndarray | None] | None = None
    # False: the FFN is act(up), with no gate (BERT).
    gated: bool = True
    # False: a token attends to every position of its sequence, later ones too (encoders).
    causal: bool = True

    @property
    def fused_qkv(self) -> bool:
        return self.k is None

    @property
    def fused_gate_up(self) -> bool:
        return self.gated and self.gate is None and self.up is not None

    @property
    def has_ffn(self) -> bool:
        """Whether the layer has a dense FFN (or a shared expert beside its experts)."""
        return self.up is not None


@dataclass(frozen=True)
class Rope:
    """One RoPE configuration, as ggml_rope_ext receives it (backends/reference/rope.py)."""

    n_rot: int
    neox: bool
    freq_base: float
    freq_scale: float
    ext_factor: float
    attn_factor: float
    beta_fast: float
    beta_slow: float
    n_ctx_orig: int
    freq_factors: np.ndarray | None  # float32 (n_rot / 2,)


@dataclass(frozen=True)
class ModelSpec:
    hparams: HParams
    n_vocab: int
    head_dim: int
    activation: str  # "silu" or "gelu_tanh"
    norm: NormKind  # "rms", or "layer" (LayerNorm, Cohere) for every norm but q/k norms
    embd_scale: float  # multiplies the token embeddings (1: none)
    logit_scale: float  # multiplies the logits (1: none)
    token_embd: Tensor
    output_norm: np.ndarray | None  # None: the last layer's output as it is (BERT)
    output: Linear
    ropes: tuple[Rope, ...]
    layers: tuple[Block, ...]
    # Encoders: what is added to each token embedding (token type 0's row, float32 (n_embd,);
    # the learned position embeddings, a (n_pos, n_embd) table), and the LayerNorm (weight,
    # bias) of the sum.
    type_embd: np.ndarray | None = None
    pos_embd: Tensor | None = None
    embd_norm: tuple[np.ndarray, np.ndarray | None] | None = None
    # How an embedding is pooled (family.POOLINGS), and a reranker's classification head:
    # tanh(cls x) then cls_out (None: not a reranker, or no second projection).
    pooling: str = "none"
    cls: Linear | None = None
    cls_out: Linear | None = None
    causal: bool = True

    @property
    def family(self) -> Family:
        return self.hparams.family


def model_spec(gg: GGUFFile, hp: HParams, n_ctx: int) -> ModelSpec:
    """The blocks of the model in `gg`; `n_ctx` picks Phi-3's long or short RoPE factors."""
    family = hp.family
    if hp.head_dim_k != hp.head_dim_v:
        raise ModelFormatError(
            f"{gg.path}: key heads of {hp.head_dim_k} and value heads of {hp.head_dim_v} "
            "dimensions: every supported family has equal ones"
        )
    tensors = _Tensors(gg, family)
    embd = tensors.matrix(name_of(family, "token_embd"), None, hp.n_embd)
    n_vocab = embd.shape[1]
    vocabulary = gg.metadata.get("tokenizer.ggml.tokens")
    if (
        isinstance(vocabulary, (list, tuple, np.ndarray, StringArray))
        and len(vocabulary) != n_vocab
    ):
        # A token id the tokenizer makes must have an embedding row, and a sampled row a token.
        raise ModelFormatError(
            f"{gg.path}: the vocabulary has {len(vocabulary)} tokens but the embedding has "
            f"{n_vocab} rows; they must be equal"
        )
    dims = Dims(n_vocab, hp.n_embd, 1, 1, hp.head_dim_k, 1, hp.n_rot, False, "none")
    tied = family.output_is_embedding or not tensors.has(name_of(family, "output"))
    output = tensors.linear("token_embd" if tied else "output", None, dims)
    encoder = _encoder_parts(tensors, hp, dims)

    ropes = rope_configs(gg, hp, n_ctx)
    layers = tuple(_block(tensors, hp, il, n_vocab, len(ropes)) for il in range(hp.n_layer))
    return ModelSpec(
        hparams=hp,
        n_vocab=n_vocab,
        head_dim=hp.head_dim_k,
        activation=family.activation,
        norm=family.norm,
        embd_scale=hp.embd_scale,
        logit_scale=hp.logit_scale,
        token_embd=embd,
        output_norm=tensors.vector("output_norm", None, dims) if family.output_norm else None,
        output=output,
        ropes=tuple(ropes),
        layers=layers,
        pooling=hp.pooling,
        causal=hp.causal,
        **encoder,
    )


def _encoder_parts(tensors: _Tensors, hp: HParams, dims: Dims) -> dict:
    """An encoder's inputs and head, each where the file has it: token type 0's row, learned
    positions, the embeddings' LayerNorm, and a reranker's classification head (cls and
    cls.output, with biases; llama.cpp requires cls's bias)."""
    family, parts = hp.family, {}
    if tensors.has(name_of(family, "token_types")):
        types = tensors.matrix(name_of(family, "token_types"), None, hp.n_embd)
        parts["type_embd"] = np.ascontiguousarray(types.dequantize()[0], dtype=np.float32)
    if family.positions == "absolute":
        pos = tensors.matrix(name_of(family, "position_embd"), None, hp.n_embd)
        if pos.shape[1] < hp.n_ctx_train:
            raise ModelFormatError(
                f"{tensors.path}: position_embd has {pos.shape[1]} rows for a context of "
                f"{hp.n_ctx_train}"
            )
        parts["pos_embd"] = pos
    if family.embedding_norm:
        parts["embd_norm"] = tensors.norm("token_embd_norm", None, dims)
    if hp.pooling == "rank":
        if not tensors.has(name_of(family, "cls")):
            raise ModelFormatError(
                f"{tensors.path}: pooling_type is rank, but the file has no classification "
                "head (cls.weight)"
            )
        parts["cls"] = tensors.linear("cls", None, dims)
        if parts["cls"].bias is None:
            raise ModelFormatError(f"{tensors.path}: the classification head has no cls.bias")
        if tensors.has(name_of(family, "cls_output")):
            n_cls_out = tensors.shape(name_of(family, "cls_output"))[-1]
            parts["cls_out"] = tensors.linear(
                "cls_output", None, replace(dims, n_cls_out=n_cls_out)
            )
    return parts


def rope_configs(gg: GGUFFile, hp: HParams, n_ctx: int) -> tuple[Rope, ...]:
    """The model's RoPE configurations: the one most layers use, then the sliding layers' own
    where it differs (Gemma 3)."""
    dims = Dims(1, hp.n_embd, 1, 1, hp.head_dim_k, 1, hp.n_rot, False, "none")
    factors = _rope_factors(_Tensors(gg, hp.family), hp, n_ctx, dims)
    ropes = [_rope(gg, hp, hp.freq_base, hp.freq_scale, hp.ext_factor, hp.attn_factor, factors)]
    swa = (hp.swa_freq_base, hp.swa_freq_scale, hp.swa_ext_factor, hp.swa_attn_factor)
    if any(hp.swa_layers) and swa != (hp.freq_base, hp.freq_scale, hp.ext_factor, hp.attn_factor):
        ropes.append(_rope(gg, hp, *swa, factors))
    return tuple(ropes)


def layer_rope(hp: HParams, il: int, n_ropes: int) -> int:
    """Which of the model's RoPE configurations layer il uses; -1: none (a NoPE layer)."""
    family, period = hp.family, hp.family.nope_period
    if not hp.use_rope or (period and il % period == period - 1):
        return -1
    if family.nope_global and not hp.swa_layers[il]:
        return -1
    return n_ropes - 1 if hp.swa_layers[il] else 0


def _block(tensors: _Tensors, hp: HParams, il: int, n_vocab: int, n_ropes: int) -> Block:
    family = hp.family
    n_head, n_head_kv = hp.n_head[il], hp.n_head_kv[il]
    if n_head_kv < 1 or n_head % n_head_kv:
        raise ModelFormatError(
            f"{tensors.path}: layer {il} has {n_head} query heads for {n_head_kv} KV heads; "
            "the query heads must split evenly over the KV heads"
        )
    experts = hp.n_expert > 0
    shared = experts and hp.n_ff_shexp != 0
    # the FFN widths, from the tensors that have them as their columns
    n_ff = n_ff_exp = 0
    if not experts:
        n_ff = tensors.matrix(name_of(family, "ffn_down", il), hp.n_embd, None).shape[0]
    else:
        n_ff_exp = tensors.shape(name_of(family, "ffn_down_exps", il))[0]
    if shared:
        n_ff = tensors.matrix(name_of(family, "ffn_down_shexp", il), hp.n_embd, None).shape[0]
        if hp.n_ff_shexp > 0 and n_ff != hp.n_ff_shexp:
            raise ModelFormatError(
                f"{tensors.path}: layer {il}'s shared expert is {n_ff} wide, but "
                f"{hp.arch}.expert_shared_feed_forward_length says {hp.n_ff_shexp}"
            )
    dims = Dims(
        n_vocab=n_vocab,
        n_embd=hp.n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=hp.head_dim_k,
        n_ff=n_ff,
        n_rot=hp.n_rot,
        fused_gate_up=family.fused_gate_up,
        qk_norm=family.qk_norm,
        n_expert=hp.n_expert,
        n_ff_exp=n_ff_exp,
        n_ff_shexp=n_ff,
    )
    fused_qkv = tensors.has(name_of(family, "attn_qkv", il))
    pre, post, post_add = family.pre_norms, family.post_norms, family.post_add_norms
    qk_norm = family.qk_norm != "none"
    swa = hp.swa_layers[il]

    def vector(role: str, present: bool) -> np.ndarray | None:
        return tensors.vector(role, il, dims) if present else None

    def linear(role: str) -> Linear:
        return tensors.linear(role, il, dims)

    if not experts:
        gated = family.gated_ffn and not family.fused_gate_up
        gate = linear("ffn_gate") if gated else None
        up, down = linear("ffn_up"), linear("ffn_down")
    elif shared:
        gate, up, down = (linear(role) for role in SHARED)
    else:
        gate = up = down = None
    return Block(
        attn_norm=vector("attn_norm", pre),
        q=linear("attn_qkv" if fused_qkv else "attn_q"),
        k=None if fused_qkv else linear("attn_k"),
        v=None if fused_qkv else linear("attn_v"),
        qk_norm=family.qk_norm,
        q_norm=vector("attn_q_norm", qk_norm),
        k_norm=vector("attn_k_norm", qk_norm),
        o=linear("attn_output"),
        post_attn_norm=vector("post_attention_norm", post),
        ffn_norm=vector("ffn_norm", family.ffn_norm),
        gate=gate,
        up=up,
        down=down,
        post_ffn_norm=vector("post_ffw_norm", post),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        window=hp.sliding_window if swa else 0,
        rope=layer_rope(hp, il, n_ropes),
        residual_scale=hp.residual_scale,
        parallel=family.parallel,
        sinks=vector("attn_sinks", family.attn_sinks),
        moe=_moe(tensors, hp, il, dims) if experts else None,
        attn_out_norm=tensors.norm("attn_output_norm", il, dims) if post_add else None,
        layer_out_norm=tensors.norm("layer_output_norm", il, dims) if post_add else None,
        gated=family.gated_ffn,
        causal=hp.causal,
    )


SHARED = ("ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp")


def _moe(tensors: _Tensors, hp: HParams, il: int, dims: Dims) -> Moe:
    experts = hp.family.experts
    assert experts is not None
    shared_gate = None
    if experts.shared == "gated":
        # a vector of n_embd in the file: the one row of a matrix
        shared_gate = tensors.linear("ffn_gate_inp_shexp", il, dims, rows=1)
    return Moe(
        router=tensors.linear("ffn_gate_inp", il, dims),
        gate=tensors.experts("ffn_gate_exps", il, dims),
        up=tensors.experts("ffn_up_exps", il, dims),
        down=tensors.experts("ffn_down_exps", il, dims),
        n_expert=hp.n_expert,
        n_used=hp.n_expert_used,
        gating=experts.gating,
        normalize=experts.normalize,
        activation=experts.activation,
        shared_gate=shared_gate,
    )


def _rope_factors(tensors: _Tensors, hp: HParams, n_ctx: int, dims: Dims) -> np.ndarray | None:
    """Frequency factors (llama_model::get_rope_factors): rope_freqs when the file has it (Llama
    3.1); else Phi-3's rope_factors_long when n_ctx exceeds the original context, its
    rope_factors_short otherwise; else none. Every layer uses the same."""
    family = hp.family
    if tensors.has(name_of(family, "rope_freqs")):
        role = "rope_freqs"
    elif n_ctx > hp.n_ctx_orig:
        role = "rope_factors_long"
    else:
        role = "rope_factors_short"
    return tensors.vector(role, None, dims) if tensors.has(name_of(family, role)) else None


def _rope(
    gg: GGUFFile,
    hp: HParams,
    base: float,
    scale: float,
    ext_factor: float,
    attn_factor: float,
    factors: np.ndarray | None,
) -> Rope:
    if hp.n_rot > hp.head_dim_k or hp.n_rot % 2:
        raise ModelFormatError(
            f"{gg.path}: RoPE over {hp.n_rot} dimensions of {hp.head_dim_k}-dimensional heads"
        )
    return Rope(
        n_rot=hp.n_rot,
        neox=hp.family.rope_neox,
        freq_base=base,
        freq_scale=scale,
        ext_factor=ext_factor,
        attn_factor=attn_factor,
        beta_fast=YARN_BETA_FAST,
        beta_slow=YARN_BETA_SLOW,
        n_ctx_orig=hp.n_ctx_orig,
        freq_factors=factors,
    )


class _Tensors:
    """The file's tensors by role, with shape checks that name the tensor at fault."""

    def __init__(self, gg: GGUFFile, family: Family) -> None:
        self.path = gg.path
        self.family = family
        self._tensors = gg.tensors

    def has(self, name: str) -> bool:
        return name in self._tensors

    def get(self, name: str) -> Tensor:
        if name not in self._tensors:
            raise ModelFormatError(f"{self.path}: the model has no tensor {name}")
        return self._tensors[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.get(name).shape

    def matrix(self, name: str, n_rows: int | None, n_cols: int | None) -> Tensor:
        """A 2-D tensor of n_rows outputs by n_cols inputs (GGUF shape (n_cols, n_rows))."""
        t = self.get(name)
        ok = len(t.shape) == 2 and all(
            want is None or got == want for got, want in zip(t.shape, (n_cols, n_rows), strict=True)
        )
        if not ok:
            raise ModelFormatError(
                f"{self.path}: tensor {name} has shape {list(t.shape)}; expected "
                f"[{n_cols or 'any'}, {n_rows or 'any'}] (GGUF order)"
            )
        return t

    def vector(self, role: str, il: int | None, dims: Dims, suffix: str = "weight") -> np.ndarray:
        name = name_of(self.family, role, il, suffix)
        t = self.get(name)
        n = dims.resolve(ROLES[role].shape)[0]
        if math.prod(t.shape) != n:
            raise ModelFormatError(
                f"{self.path}: tensor {name} has shape {list(t.shape)}; expected {n} values"
            )
        return np.ascontiguousarray(t.dequantize().reshape(n), dtype=np.float32)

    def norm(self, role: str, il: int | None, dims: Dims) -> tuple[np.ndarray, np.ndarray | None]:
        """A norm's weight and, where the file has one, its bias (BERT's LayerNorms)."""
        has_bias = self.has(name_of(self.family, role, il, "bias"))
        bias = self.vector(role, il, dims, "bias") if has_bias else None
        return self.vector(role, il, dims), bias

    def linear(self, role: str, il: int | None, dims: Dims, rows: int | None = None) -> Linear:
        """The role's matrix and bias; `rows`: a vector role read as a matrix of that many rows."""
        name = name_of(self.family, role, il)
        if rows is not None:
            (n_values,) = dims.resolve(ROLES[role].shape)
            n_rows, n_cols = rows, n_values // rows
            weight = self.get(name)
            if math.prod(weight.shape) != n_values:
                raise ModelFormatError(
                    f"{self.path}: tensor {name} has shape {list(weight.shape)}; expected "
                    f"{n_values} values"
                )
        else:
            n_rows, n_cols = dims.resolve(ROLES[role].shape)
            weight = self.matrix(name, n_rows, n_cols)
        has_bias = self.has(name_of(self.family, role, il, "bias"))
        # a matrix role's first symbol is its rows: one bias value each
        bias = self.vector(role, il, dims, "bias") if has_bias else None
        return Linear(name, weight, n_rows, n_cols, bias)

    def experts(self, role: str, il: int, dims: Dims) -> ExpertLinear:
        """The role's n_expert matrices (GGUF shape (n_cols, n_rows, n_expert)) and biases
        (GGUF shape (n_rows, n_expert))."""
        n_expert, n_rows, n_cols = dims.resolve(ROLES[role].shape)
        name = name_of(self.family, role, il)
        t = self.get(name)
        if t.shape != (n_cols, n_rows, n_expert):
            raise ModelFormatError(
                f"{self.path}: tensor {name} has shape {list(t.shape)}; expected "
                f"[{n_cols}, {n_rows}, {n_expert}] (GGUF order)"
            )
        bias = None
        bias_name = name_of(self.family, role, il, "bias")
        if self.has(bias_name):
            b = self.get(bias_name)
            if b.shape != (n_rows, n_expert):
                raise ModelFormatError(
                    f"{self.path}: tensor {bias_name} has shape {list(b.shape)}; expected "
                    f"[{n_rows}, {n_expert}] (GGUF order)"
                )
            bias = np.ascontiguousarray(b.dequantize(), dtype=np.float32)
        return ExpertLinear(name, t, n_expert, n_rows, n_cols, bias)
