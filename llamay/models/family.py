"""What a family file declares: how one architecture's forward pass differs from Llama's.

A family file (llamay/models/families/<name>.py) holds one `Family` per architecture it covers
and nothing else. From it the shared code builds the rest: hparams.py reads the numbers (the
shared keys, plus the keys the family names here), tensors.py says which GGUF tensors each layer
has and their shapes (for the spec builder and the synthetic-model writer alike), and spec.py
builds the per-layer `Block` descriptors that the forward step (csrc/forward.h) and the reference
backend both read. A dense family whose blocks these fields can express is one file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Norms = Literal["pre", "post", "pre+post", "post-add"]
QKNorm = Literal["none", "head", "projection"]
NormKind = Literal["rms", "layer"]
Gating = Literal["softmax", "softmax_weight"]
ExpertActivation = Literal["silu", "swiglu_oai"]
SharedExpert = Literal["none", "gated", "plain"]
Positions = Literal["rope", "absolute"]
# llama_pooling_type (llama.h), by the number {arch}.pooling_type holds
POOLINGS = ("none", "mean", "cls", "last", "rank")


@dataclass(frozen=True)
class Scales:
    """Multipliers a family puts into the stream, each read from the metadata key
    {arch}.KEY (None: the family has none; a missing key means 1, as in llama.cpp)."""

    embedding: str | None = None  # multiplies the token embeddings
    residual: str | None = None  # multiplies attention and FFN outputs before each residual add
    attention: str | None = None  # multiplies q.k in place of 1/sqrt(head_dim)
    logit: str | None = None  # the logits are divided by it (Granite)
    logit_multiplier: str | None = None  # the logits are multiplied by it (Cohere)


@dataclass(frozen=True)
class Experts:
    """A mixture-of-experts FFN, as llama.cpp's build_moe_ffn computes it for the family.

    A router (ffn_gate_inp) scores every expert; the n_expert_used best go to work and their
    outputs are summed, weighted. `gating` says how the weights come about: "softmax" takes the
    softmax over all experts, then the top k (renormalised to sum 1 where `normalize`: Qwen 3,
    Mixtral, Granite; as they are: Qwen 2 MoE); "softmax_weight" takes the top k of the raw
    router logits, then the softmax over those k (gpt-oss).
    """

    gating: Gating = "softmax"
    normalize: bool = False
    # "silu": silu(gate) * up; "swiglu_oai": gpt-oss's clamped SwiGLU (ggml_swiglu_oai, alpha
    # 1.702, limit 7): min(gate, 7) * sigmoid(1.702 min(gate, 7)) * (clamp(up, -7, 7) + 1).
    activation: ExpertActivation = "silu"
    # The key of each expert's FFN width; None: the dense feed_forward_length (Mixtral, Granite).
    n_ff_key: str | None = "expert_feed_forward_length"
    # Shared expert: "gated" (Qwen 2 MoE: always there, scaled by sigmoid(ffn_gate_inp_shexp . x)),
    # "plain" (Granite MoE Shared: there when expert_shared_feed_forward_length > 0, unscaled).
    shared: SharedExpert = "none"
    # Biases on the router and on every expert's projections, for the synthetic writer (gpt-oss).
    biases: bool = False
    # Llama: experts only where the file says expert_count > 0 (Mixtral); otherwise always.
    optional: bool = False


@dataclass(frozen=True)
class Family:
    """How one architecture (general.architecture = `arch`) differs from Llama in llama.cpp."""

    arch: str
    # llama_model_rope_type: Llama rotates adjacent pairs, NeoX rotates the two halves.
    rope_neox: bool = False
    # The FFN's gate activation: silu(gate) * up, or gelu_tanh(gate) * up (Gemma's GeGLU).
    activation: Literal["silu", "gelu_tanh"] = "silu"
    # Where the norms sit: before attention and FFN ("pre", Llama), on their outputs before
    # the residual add ("post", OLMo 2), or both (Gemma 2/3); "post-add": on the residual
    # stream after each add (BERT: attn_output_norm, layer_output_norm, LayerNorms with biases).
    norms: Norms = "pre"
    # Which norm: RMS (almost everyone) or LayerNorm without bias (Cohere: ggml_norm, its eps
    # read from attention.layer_norm_epsilon). Query/key norms are always RMS.
    norm: NormKind = "rms"
    # Cohere: attention and FFN both read the same normed input, and both add to the stream
    # (x + ffn + attn); no ffn_norm.
    parallel: bool = False
    # RMS norm of queries and keys before RoPE: over each head (weights of head_dim: Qwen 3,
    # Gemma 3) or over the whole projection (weights of n_head * head_dim: OLMo 2).
    qk_norm: QKNorm = "none"
    # Phi-3: attn_qkv holds [q; k; v] and ffn_up holds [gate; up] (2 * n_ff rows), no ffn_gate.
    # The spec builder takes a fused attn_qkv wherever a file has one; the writer writes them.
    fused_qkv: bool = False
    fused_gate_up: bool = False
    # An encoder (BERT): every token attends to every token of its sequence, earlier or later
    # ({arch}.attention.causal where the file says so); a step holds whole sequences.
    causal: bool = True
    # "absolute": learned position embeddings (position_embd) added to the token embeddings,
    # and no RoPE (BERT); "rope": rotary positions in every layer that has them.
    positions: Positions = "rope"
    # The FFN: act(gate) * up (gated), or act(up) with no gate (BERT's GELU FFN).
    gated_ffn: bool = True
    # BERT: the embeddings (plus token type 0's row, plus positions) are LayerNormed
    # (token_embd_norm, with its bias), and there is no output norm.
    embedding_norm: bool = False
    output_norm: bool = True
    # The pooling of an embedding model when the file has no {arch}.pooling_type (POOLINGS).
    pooling: str = "none"
    # Linear layers the synthetic writer gives biases (the spec builder takes any bias a file has).
    biases: tuple[str, ...] = ()
    # Gemma: token embeddings multiplied by sqrt(n_embd), in fp32.
    embedding_sqrt_scale: bool = False
    scales: Scales = Scales()
    # Gemma: the output projection is always token_embd, even if output.weight exists.
    output_is_embedding: bool = False
    # set_swa_pattern(n): layer il uses the sliding window iff il % n < n - 1 (0: never).
    swa_period: int = 0
    # The file may set the period in {arch}.attention.sliding_window_pattern (gpt-oss, Cohere 2,
    # OLMo 3).
    swa_period_key: bool = False
    # The window when {arch}.attention.sliding_window is absent (0: no sliding window then).
    swa_default_window: int = 0
    # Gemma 3: sliding layers rotate with base 10000 and no scaling (rope_freq_*_train_swa).
    swa_rope_base: float | None = None
    # gpt-oss: sliding layers rotate with {arch}.rope.freq_base_swa where the file has it.
    swa_rope_base_key: bool = False
    # OLMo 3: sliding layers rotate with the global base and no scaling at all (no YaRN).
    swa_rope_unscaled: bool = False
    # Layers without RoPE: every n-th layer, il % n == n - 1 (SmolLM3: 4); 0: none.
    nope_period: int = 0
    # Cohere 2: only the sliding layers rotate; the global ones are NoPE.
    nope_global: bool = False
    # Granite: {arch}.rope.scaling.finetuned = false switches RoPE off in every layer.
    rope_switch: bool = False
    # gpt-oss: a learned logit per query head (attn_sinks) joins the softmax's denominator.
    attn_sinks: bool = False
    # A mixture-of-experts FFN in place of the dense one (None: dense).
    experts: Experts | None = None
    # Logit soft-caps, cap * tanh(x / cap). None: llama.cpp does not read the key for this
    # architecture; otherwise the default used when the key is absent (0: no cap).
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # Gemma 2/3 scale queries by 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim) for their
    # 27B model, which llama.cpp recognises by its layer count (LLM_TYPE_27B).
    layers_of_27b: int = 0
    # Tensor names that differ from the shared table (tensors.py), role -> name pattern.
    tensor_names: dict[str, str] = field(default_factory=dict)
    # Metadata the synthetic writer adds for this family, so that its features are exercised.
    example_metadata: dict[str, Any] = field(default_factory=dict)
    # The real models that use it, for docs/models.md and `llamay show`.
    models: str = ""

    @property
    def pre_norms(self) -> bool:
        return self.norms in ("pre", "pre+post")

    @property
    def post_norms(self) -> bool:
        return self.norms in ("post", "pre+post")

    @property
    def post_add_norms(self) -> bool:
        return self.norms == "post-add"

    @property
    def ffn_norm(self) -> bool:
        """Whether the FFN has a norm of its own before it (a parallel block shares attention's)."""
        return self.pre_norms and not self.parallel
