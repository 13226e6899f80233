"""The Q8_0 KV cache: ggml's Q8_0 blocks in the pages (17/32 of F16's bytes), the same bits on
every kernel set, thread count and batch, snapshots that record it, and logits as close to the
F16 cache's as llama.cpp's own Q8_0 cache is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf import quants as gguf_quants

import llamay
from llamay._core.kernels import kernel_sets
from llamay.errors import LlamayError, SnapshotMismatch
from llamay.state.layout import KVLayout
from llamay.verify import run_checks

from helpers.tiny import write_tiny

SYNTH = Path(__file__).parent.parent / "data" / "synth"
QWEN2 = SYNTH / "qwen2-Q8_0.gguf"
TOKENS = [(11 + 53 * i) % 2000 + 3 for i in range(45)]


def load(kv_type: str, **options) -> llamay.engine.Model:
    return llamay.load(QWEN2, threads=1, n_ctx=256, page_tokens=16, kv_type=kv_type, **options)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_a_q8_0_page_takes_17_32_of_an_f16_page():
    f16, q8 = (KVLayout(4, 2, 128, 32, dtype) for dtype in ("F16", "Q8_0"))
    assert q8.page_bytes * 32 == f16.page_bytes * 17
    with load("q8_0") as q8_model, load("F16") as f16_model:
        stats = q8_model.kv_stats()
        assert q8_model.kv_type == "Q8_0" and stats["dtype"] == "Q8_0"
        assert stats["bytes_per_page"] * 32 == f16_model.kv_stats()["bytes_per_page"] * 17


def test_a_head_size_q8_0_cannot_hold_is_refused_at_load(tmp_path):
    path = write_tiny(tmp_path / "tiny.gguf", "llama", head_dim=16)
    with pytest.raises(LlamayError, match=r"multiple of 32.*F16"):
        llamay.load(path, kv_type="q8_0")
    with pytest.raises(LlamayError, match="KV type must be one of F16, F32, Q8_0, not"):
        llamay.load(path, kv_type="q4_0")


def test_the_reference_backend_says_it_has_no_q8_0_cache():
    with pytest.raises(LlamayError, match="reference backend keeps its KV cache as F16 or F32"):
        load("q8_0", backend="reference")


def test_layer_0_kv_is_ggml_q8_0_of_the_f32_rows():
    """Layer 0's K and V depend on the tokens alone (no attention comes before them), so the
    Q8_0 cache must hold exactly ggml's quantization of what the F32 cache holds."""
    pages, layouts = {}, {}
    for kv_type in ("F32", "Q8_0"):
        with load(kv_type) as model, model.context() as context:
            context.feed(TOKENS)
            layout = model.kv_cache.layout
            layouts[kv_type] = layout
            per_layer = layout.page_bytes // layout.n_layers
            pages[kv_type] = [model.kv_cache.storage.read(p)[:per_layer] for p in context.pages]
    for exact, quantized in zip(pages["F32"], pages["Q8_0"], strict=True):
        rows = layouts["F32"].values(exact)  # (2 * n_kv_heads, page_tokens, head_dim)
        expected = gguf_quants.quantize(np.ascontiguousarray(rows), GGMLQuantizationType.Q8_0)
        assert expected.tobytes() == quantized


@pytest.mark.parametrize("kernels", [k for k in kernel_sets() if k != "reference"])
def test_every_kernel_set_gives_the_reference_sets_bits(kernels):
    results = []
    for chosen in ("reference", kernels):
        with load("q8_0", kernels=chosen) as model, model.context() as context:
            results.append(context.feed(TOKENS, all_logits=True))
    assert np.array_equal(*results)


def test_the_determinism_checks_pass_with_a_q8_0_cache():
    checks = list(run_checks(QWEN2, kv_type="Q8_0"))
    assert [c.name for c in checks if not c.passed] == []
    snapshot = next(c for c in checks if c.name == "snapshot round trip")
    assert "KV type refused" in snapshot.figure


def test_a_snapshot_of_one_kv_type_is_refused_by_another(tmp_path):
    with load("F16") as model, model.context() as context:
        context.feed(TOKENS)
        context.save(tmp_path / "f16.kv")
    with load("q8_0") as model:
        with pytest.raises(SnapshotMismatch, match="kv_dtype F16 \\(this model: Q8_0\\)"):
            model.restore(tmp_path / "f16.kv")
        with model.context() as context:
            context.feed(TOKENS)
            context.save(tmp_path / "q8.kv")
            expected = context.logits()
        with model.restore(tmp_path / "q8.kv") as restored:
            assert np.array_equal(restored.logits(), expected)


def test_q8_0_logits_are_as_close_to_f16_as_llama_cpps_own(gemma_path, data_dir):
    """Teacher-forced over 600 tokens of Gemma 3 270M, mean KL(F16 || Q8_0) is 0.0083 here and
    0.0085 for llama.cpp's own F16 and Q8_0 caches (llama-cpp-python 0.3.36, flash attention,
    the same text): a real quantization, not a copy, and no worse than llama.cpp's."""
    text = (data_dir / "texts" / "gpl-3.txt").read_text()[:6000]
    rows = {}
    for kv_type in ("F16", "q8_0"):
        with llamay.load(gemma_path, kv_type=kv_type, n_ctx=1024) as model:
            ids = model.tokenize(text)[:600]
            with model.context() as context:
                rows[kv_type] = log_softmax(context.feed(ids, all_logits=True))
    kl = (np.exp(rows["F16"]) * (rows["F16"] - rows["q8_0"])).sum(axis=1)
    assert 1e-4 < kl.mean() < 0.02
    assert (rows["F16"].argmax(axis=1) == rows["q8_0"].argmax(axis=1)).mean() > 0.9
