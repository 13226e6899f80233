"""Switching one feature of a model off, to show that a test sees it.

Each drop maps a ModelSpec to the same model without the feature (dataclasses.replace on the
spec, its layers, their experts). `dropped(monkeypatch, name)` makes every model loaded after it
(llamay.load, any backend) run so: the test then checks that its measure moves far past its
bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest

from llamay.engine import model as model_module
from llamay.models.spec import Block, ModelSpec


def _layers(spec: ModelSpec, change: Callable[[Block], Block]) -> ModelSpec:
    return replace(spec, layers=tuple(change(b) for b in spec.layers))


def _moe(spec: ModelSpec, **changes) -> ModelSpec:
    return _layers(spec, lambda b: replace(b, moe=replace(b.moe, **changes)) if b.moe else b)


def _no_shared(b: Block) -> Block:
    return replace(b, gate=None, up=None, down=None, n_ff=0) if b.moe else b


def _expert_biases(spec: ModelSpec) -> ModelSpec:
    def strip(b: Block) -> Block:
        m = b.moe
        if m is None:
            return b
        plain = {k: replace(getattr(m, k), bias=None) for k in ("gate", "up", "down")}
        return replace(b, moe=replace(m, **plain, router=replace(m.router, bias=None)))

    return _layers(spec, strip)


def _qk_norm_per_head(b: Block) -> Block:
    """OLMo 2's q/k norm over each head instead of the whole projection (the first head's
    weights for every head)."""
    d = b.q_norm.shape[0] // b.n_head
    return replace(b, qk_norm="head", q_norm=b.q_norm[:d], k_norm=b.k_norm[:d])


def _sequential(b: Block) -> Block:
    """Cohere's parallel block as a sequential one: the FFN after attention, normed anew with
    attention's norm weights."""
    return replace(b, parallel=False, ffn_norm=b.attn_norm)


def _no_yarn(spec: ModelSpec) -> ModelSpec:
    ropes = tuple(replace(r, ext_factor=0.0, attn_factor=1.0, freq_scale=1.0) for r in spec.ropes)
    return replace(spec, ropes=ropes)


def _plain_attention_scale(spec: ModelSpec) -> ModelSpec:
    hp = replace(spec.hparams, attn_scale=1.0 / math.sqrt(spec.head_dim))
    return replace(spec, hparams=hp)


def _sliding_rope_as_global(spec: ModelSpec) -> ModelSpec:
    return _layers(spec, lambda b: replace(b, rope=min(b.rope, 0)))


def _norm_biases(spec: ModelSpec) -> ModelSpec:
    def strip(norm):
        return None if norm is None else (norm[0], None)

    spec = replace(spec, embd_norm=strip(spec.embd_norm))
    return _layers(
        spec,
        lambda b: replace(
            b, attn_out_norm=strip(b.attn_out_norm), layer_out_norm=strip(b.layer_out_norm)
        ),
    )


DROPS: dict[str, Callable[[ModelSpec], ModelSpec]] = {
    # encoders: attention over later tokens too, their inputs, their post-add norms' biases
    "bidirectional attention": lambda s: replace(s, causal=True),
    "position embeddings": lambda s: replace(s, pos_embd=None),
    "token type embedding": lambda s: replace(s, type_embd=None),
    "embedding norm": lambda s: replace(s, embd_norm=None),
    "LayerNorm biases": _norm_biases,
    "embedding scale": lambda s: replace(s, embd_scale=1.0),
    "residual scale": lambda s: _layers(s, lambda b: replace(b, residual_scale=1.0)),
    "attention scale": _plain_attention_scale,
    "logit scale": lambda s: replace(s, logit_scale=1.0),
    "post-norms": lambda s: _layers(
        s, lambda b: replace(b, post_attn_norm=None, post_ffn_norm=None)
    ),
    "q/k norm over the projection": lambda s: _layers(s, _qk_norm_per_head),
    "NoPE layers": lambda s: _layers(s, lambda b: replace(b, rope=max(b.rope, 0))),
    "parallel block": lambda s: _layers(s, _sequential),
    "LayerNorm": lambda s: replace(s, norm="rms"),
    "sliding window": lambda s: _layers(s, lambda b: replace(b, window=0)),
    "sliding layers' own RoPE": _sliding_rope_as_global,
    "renormalisation": lambda s: _moe(s, normalize=False),
    "shared expert": lambda s: _layers(s, _no_shared),
    "shared expert gate": lambda s: _moe(s, shared_gate=None),
    "attention sinks": lambda s: _layers(s, lambda b: replace(b, sinks=None)),
    "clamped SwiGLU": lambda s: _moe(s, activation="silu"),
    "top-k then softmax": lambda s: _moe(s, gating="softmax"),
    "expert and router biases": _expert_biases,
    "YaRN": _no_yarn,
}


def dropped(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Models loaded from now on (in this test) run without feature `name`."""
    build, drop = model_module.model_spec, DROPS[name]
    monkeypatch.setattr(
        model_module, "model_spec", lambda gg, hp, n_ctx: drop(build(gg, hp, n_ctx))
    )
