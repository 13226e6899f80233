"""The CPU backend computes what the float64 reference backend computes, family by family.

Tiny random models with F32 weights and an F32 KV cache: the CPU backend quantizes nothing
there, so its log-probabilities must equal the reference's to fp32 rounding. We allow 1e-4
(what we see is 2e-6 to 8e-6: fp32 sums over 64-96 terms, our exp/tanh within 2 ulp) and check,
for every feature a file switches on, that dropping it from the reference moves the result by
more than 100 times that: the test sees the feature. The newer families (NEW_CASES: the
mixtures of experts, Granite, OLMo 2 and 3, SmolLM3, Cohere 2, gpt-oss) switch their features
off in the reference itself (tests/helpers/drops.py).

The synthetic models trained by the llama.cpp project's tools (tests/data/synth, Q8_0 weights,
F16 KV): the CPU backend, like llama.cpp, quantizes activations to 8 bits and stores K/V in
fp16, so it is compared by perplexity: within 1% of llama.cpp's (reference.json) and of the
reference's on the same chunks. The CPU backend lands within 0.01% of llama.cpp on all seven.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay.backends.reference.forward import log_softmax

from helpers.drops import dropped
from helpers.perplexity import perplexity
from helpers.tiny import write_tiny

DATA = Path(__file__).parent.parent / "data"
SYNTH = json.loads((DATA / "synth" / "reference.json").read_text())["files"]
TOLERANCE = 1e-4

# name: (architecture, write_tiny options, the metadata whose absence the test must see)
CASES = {
    "llama": ("llama", {}, None),
    "llama-linear": (
        "llama",
        {"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 2.0},
        "llama.rope.scaling.factor",
    ),
    "llama-yarn": (
        "llama",
        {
            "llama.rope.scaling.type": "yarn",
            "llama.rope.scaling.factor": 4.0,
            "llama.rope.scaling.original_context_length": 64,
        },
        "llama.rope.scaling.type",
    ),
    "qwen2": ("qwen2", {"qwen2.rope.freq_base": 1e6}, "qwen2.rope.freq_base"),
    "qwen3": ("qwen3", {}, None),
    "phi3": ("phi3", {}, None),
    "gemma": ("gemma", {}, None),
    "gemma2-window": (
        "gemma2",
        {
            "gemma2.attention.sliding_window": 12,
            "gemma2.attn_logit_softcapping": 5.0,
            "gemma2.final_logit_softcapping": 8.0,
        },
        "gemma2.attention.sliding_window",
    ),
    "gemma3-window": (
        "gemma3",
        {"gemma3.attention.sliding_window": 12, "gemma3.rope.freq_base": 1e6},
        "gemma3.attention.sliding_window",
    ),
}
PROMPT = [1, *np.random.default_rng(1).integers(3, 64, 69).tolist()]

# The newer families: name -> (architecture, metadata, write_tiny options, the features
# (tests/helpers/drops.py) whose absence from the reference the test must see).
YARN = {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0}
MOE = {"n_expert": 4, "n_expert_used": 2}
NEW_CASES = {
    "granite": (
        "granite",
        {"granite.attention.scale": 0.5},  # not 1/sqrt(head_dim) = 0.25
        {"n_layer": 2},
        ["embedding scale", "residual scale", "attention scale", "logit scale"],
    ),
    "granite-nope": ("granite", {"granite.rope.scaling.finetuned": False}, {}, []),
    "granitemoe": (
        "granitemoe",
        {},
        {**MOE, "n_ff_shexp": 48},
        ["shared expert", "renormalisation"],
    ),
    "olmo2": ("olmo2", {}, {}, ["post-norms", "q/k norm over the projection"]),
    "olmo3-window": (
        "olmo2",
        {
            "olmo2.attention.sliding_window": 12,
            **{f"olmo2.{k}": v for k, v in YARN.items()},
            "olmo2.rope.scaling.original_context_length": 64,
        },
        {"n_layer": 4},
        ["sliding window", "sliding layers' own RoPE"],
    ),
    "smollm3": ("smollm3", {}, {"n_layer": 4}, ["NoPE layers"]),
    "cohere2": (
        "cohere2",
        {"cohere2.attention.sliding_window": 12},
        {"n_layer": 4},
        ["parallel block", "NoPE layers", "LayerNorm", "sliding window", "logit scale"],
    ),
    "qwen2moe": ("qwen2moe", {}, MOE, ["shared expert", "shared expert gate"]),
    "qwen3moe": ("qwen3moe", {}, MOE, ["renormalisation"]),
    "mixtral": ("llama", {}, MOE, ["renormalisation"]),
    "gpt-oss": (
        "gpt-oss",
        {
            "gpt-oss.attention.sliding_window": 12,
            "gpt-oss.rope.scaling.original_context_length": 64,
        },
        MOE,
        [
            "attention sinks",
            "clamped SwiGLU",
            "top-k then softmax",
            "expert and router biases",
            "sliding window",
            "YaRN",
        ],
    ),
}


def logprobs(path: Path, prompt: list[int] = PROMPT, **load_options) -> np.ndarray:
    model = llamay.load(path, threads=1, kv_type="F32", **load_options)
    with model.context() as ctx:
        return log_softmax(ctx.feed(prompt, all_logits=True).astype(np.float64))


def reference_logits(path: Path, n_ctx: int | None = None) -> callable:
    """ids -> logits of the reference backend, each sequence fed to a new context."""
    model = llamay.load(path, backend="reference", kv_type="F32", n_ctx=n_ctx)

    def logits(ids: list[int]) -> np.ndarray:
        with model.context() as ctx:
            return ctx.feed(ids, all_logits=True).astype(np.float64)

    return logits


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("page_tokens", [16, 32])
def test_tiny_models_match_the_reference(tmp_path, name, page_tokens):
    arch, metadata, feature = CASES[name]
    n_layer = 6 if arch == "gemma3" else 3  # gemma3: five sliding layers, then a global one
    path = write_tiny(tmp_path / "m.gguf", arch, n_layer=n_layer, metadata=metadata)
    got = logprobs(path, page_tokens=page_tokens)
    expected = logprobs(path, backend="reference")
    assert np.abs(got - expected).max() < TOLERANCE
    if feature is not None:
        without = {k: v for k, v in metadata.items() if k != feature}
        other = write_tiny(tmp_path / "other.gguf", arch, n_layer=n_layer, metadata=without)
        assert np.abs(got - logprobs(other, backend="reference")).max() > 100 * TOLERANCE


@pytest.mark.parametrize("name", NEW_CASES)
def test_new_families_match_the_reference(tmp_path, monkeypatch, name):
    """Each of the newer families, and each of its features dropped from the reference."""
    arch, metadata, options, features = NEW_CASES[name]
    path = write_tiny(tmp_path / "m.gguf", arch, metadata=metadata, **options)
    got = logprobs(path, page_tokens=16)
    assert np.abs(got - logprobs(path, backend="reference")).max() < TOLERANCE
    for feature in features:
        with monkeypatch.context() as patch:
            dropped(patch, feature)
            without = logprobs(path, backend="reference")
        assert np.abs(got - without).max() > 100 * TOLERANCE, feature


def test_granite_rope_switch(tmp_path):
    """rope.scaling.finetuned = false: no layer rotates (NoPE everywhere)."""
    off = write_tiny(
        tmp_path / "off.gguf", "granite", metadata={"granite.rope.scaling.finetuned": False}
    )
    on = write_tiny(tmp_path / "on.gguf", "granite")
    assert np.abs(logprobs(off) - logprobs(on)).max() > 100 * TOLERANCE
    with pytest.MonkeyPatch.context() as patch:
        dropped(patch, "NoPE layers")  # every layer back to RoPE
        assert np.abs(logprobs(on) - logprobs(off)).max() < TOLERANCE


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_quantized_tiny_model_is_close_to_the_reference(tmp_path, arch):
    """Q8_0 weights and an F16 KV cache: the engine quantizes activations to 8 bits, as
    llama.cpp does, which moves these random models' log-probabilities by ~0.015-0.045 on
    average; measured as KL(reference || engine), ~2e-4. A wrong block costs far more: we
    allow 1e-3."""
    n_layer = 6 if arch == "gemma3" else 3
    path = write_tiny(tmp_path / "m.gguf", arch, n_layer=n_layer, weight_type="Q8_0")
    model = llamay.load(path, threads=1)
    got = log_softmax(model.context().feed(PROMPT, all_logits=True).astype(np.float64))
    expected = log_softmax(reference_logits(path)(PROMPT))
    kl = (np.exp(expected) * (expected - got)).sum(axis=1)
    assert kl.mean() < 1e-3


@pytest.mark.parametrize("entry", SYNTH, ids=[e["model"] for e in SYNTH])
def test_synth_perplexity_matches_llama_cpp_and_the_reference(entry):
    n_ctx = entry["perplexity"]["n_ctx"]
    path = DATA / "synth" / entry["file"]
    model = llamay.load(path, threads=1, n_ctx=n_ctx)
    # llama-perplexity tokenizes with add_special and without parsing special tokens.
    tokens = model.tokenize((DATA / "texts" / "gpl-2.txt").read_text(), special=False)
    ppl, n_chunks, n_scored = llamay.engine.perplexity(model, tokens, n_ctx=n_ctx)
    assert n_chunks == len(tokens) // n_ctx
    assert n_scored == n_chunks * (n_ctx - 1 - n_ctx // 2)
    assert ppl == pytest.approx(entry["perplexity"]["ppl"], rel=0.01)

    # the reference is slow: compare over the first two chunks
    head = tokens[: 2 * n_ctx]
    bos = model.tokenizer.bos_id if model.tokenizer.add_bos else None
    reference = perplexity(reference_logits(path, n_ctx), head, n_ctx, bos)
    engine, _, _ = llamay.engine.perplexity(model, head, n_ctx=n_ctx)
    assert engine == pytest.approx(reference, rel=0.01)
