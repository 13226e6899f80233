"""The families of tests/data/families against llama.cpp, at every type, on synthetic models.

tests/data/families holds, for Granite, Granite MoE, OLMo 2, SmolLM3, Cohere 2, Qwen 2 MoE,
Qwen 3 MoE, Mixtral and gpt-oss, each at F16, Q8_0 and Q4_K_M (and gpt-oss at MXFP4_MOE, its
real files' type), llama.cpp's top-32 log-probabilities at each of 160 positions of a text
(tools/gen_family_references.py; the files themselves are written again here from their
recipes: tests/helpers/families.py).

The measure: the mean over positions of KL(llama.cpp || llamay), over llama.cpp's top 32 tokens
and the rest lumped into one; and the same argmax wherever llama.cpp's top token leads by at
least 0.5 nats. The bound is calibrated on llama.cpp against itself: the same file with flash
attention, and fed token by token on one thread, give mean KLs from 1e-11 (Granite, F16) to
6e-3 (Qwen 3 MoE, Q8_0, where near-tied router scores send a token to other experts); llamay
lands within 1.4 times the larger of the two on every file (docs/models.md has the table), and
each test allows 3 times it. Dropping any one feature of a family (tests/helpers/drops.py)
moves the measure to more than 10 times that bound, on the family's file of the tightest bound.
"""

from __future__ import annotations

import numpy as np
import pytest

import llamay
from llamay.backends.reference.forward import log_softmax

from helpers import families
from helpers.drops import dropped

ARGMAX_MARGIN = 0.5  # nats
CALIBRATION_MULTIPLE = 3.0


def bound(name: str) -> float:
    entry = families.index()["files"][name]
    return CALIBRATION_MULTIPLE * max(entry["self_kl_flash_attn"], entry["self_kl_token_by_token"])


def llamay_logprobs(path, backend: str = "cpu") -> np.ndarray:
    model = llamay.load(path, threads=2, backend=backend)
    try:
        with model.context() as ctx:
            logits = ctx.feed(families.tokens(), all_logits=True)
    finally:
        model.close()
    return log_softmax(logits.astype(np.float64))


def measure(name: str, logprobs: np.ndarray) -> tuple[float, np.ndarray]:
    ids, ref = families.reference(name)
    kl = families.coarse_kl(ids, ref, logprobs)
    clear = families.clear_argmax(ref, ARGMAX_MARGIN)
    return float(kl.mean()), logprobs.argmax(axis=1)[clear] == ids[clear, 0]


@pytest.mark.parametrize("name", families.entries())
def test_matches_llama_cpp(tmp_path, name):
    kl, agree = measure(name, llamay_logprobs(families.model_file(name, tmp_path)))
    assert kl <= bound(name)
    assert agree.size > 0 and agree.all()


@pytest.mark.parametrize("name", [n for n in families.entries() if n.endswith("-F16")])
def test_reference_backend_matches_llama_cpp(tmp_path, name):
    """The float64 spec, too (F16 files: with quantized weights llama.cpp, like the CPU backend,
    quantizes the activations the reference keeps exact)."""
    path = families.model_file(name, tmp_path)
    kl, agree = measure(name, llamay_logprobs(path, backend="reference"))
    assert kl <= bound(name)
    assert agree.all()


FEATURES = {
    "granite": ["embedding scale", "residual scale", "attention scale", "logit scale"],
    "granitemoe": ["shared expert", "renormalisation", "residual scale"],
    "olmo2": ["post-norms", "q/k norm over the projection"],
    "smollm3": ["NoPE layers"],
    "cohere2": ["parallel block", "NoPE layers", "LayerNorm", "sliding window", "logit scale"],
    "qwen3moe": ["renormalisation"],
    "qwen2moe": ["shared expert", "shared expert gate"],
    "mixtral": ["renormalisation"],
    "gpt-oss": [
        "attention sinks",
        "clamped SwiGLU",
        "top-k then softmax",
        "expert and router biases",
        "sliding window",
        "YaRN",
    ],
}


@pytest.mark.parametrize(
    ("model", "feature"), [(m, f) for m, features in FEATURES.items() for f in features]
)
def test_dropping_a_feature_fails_the_comparison(tmp_path, monkeypatch, model, feature):
    candidates = [n for n in families.entries() if families.index()["files"][n]["model"] == model]
    name = min(candidates, key=bound)
    path = families.model_file(name, tmp_path)
    dropped(monkeypatch, feature)
    kl, _ = measure(name, llamay_logprobs(path))
    assert kl > 10 * bound(name)
