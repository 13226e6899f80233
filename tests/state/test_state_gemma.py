"""The state engine on the real Gemma 3 270M: forks allocate nothing and continue exactly as a
cold recompute on a separate model instance; snapshots round-trip exactly and damaged or
foreign ones are refused with nothing leaked; a shared prefix costs only the new pages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay.errors import SnapshotCorrupt, SnapshotMismatch

QWEN2 = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"
N_PROMPT = 32 * 32  # 32 full pages of 32 tokens


@pytest.fixture(scope="module")
def model(gemma_path) -> llamay.engine.Model:
    return llamay.load(gemma_path, threads=1, n_ctx=1280)


@pytest.fixture(scope="module")
def cold(gemma_path) -> llamay.engine.Model:
    return llamay.load(gemma_path, threads=1, n_ctx=1280)


@pytest.fixture(scope="module")
def prompt(model) -> list[int]:
    text = Path(__file__).parent.parent / "data" / "texts" / "gpl-2.txt"
    return model.tokenize(text.read_text())[:N_PROMPT]


def cold_logits(cold, tokens) -> np.ndarray:
    """The logits after tokens, computed from scratch (no cached prefix)."""
    cold.kv_cache.clear_prefix_cache()
    with cold.context() as ctx:
        ctx.feed(tokens)
        return ctx.logits()


def test_forks_allocate_nothing_and_continue_exactly(model, cold, prompt):
    ctx = model.context()
    ctx.feed(prompt)
    used = model.kv_stats()["pages_used"]
    forks = [ctx.fork() for _ in range(8)]
    assert model.kv_stats()["pages_used"] == used
    continuations = [[1000 + i, 2000 + i] for i in range(8)]
    model.forward_batch(list(zip(forks, continuations, strict=True)))
    assert model.kv_stats()["pages_used"] == used + 8  # one new page each: the prompt is full
    for fork, extra in zip(forks[:2], continuations, strict=False):
        assert np.array_equal(fork.logits(), cold_logits(cold, prompt + extra))
    for fork in forks:
        fork.close()
    ctx.close()


def test_save_restore_continue_is_exact_and_bad_snapshots_leak_nothing(
    model, cold, prompt, tmp_path
):
    tokens = prompt[:700]
    with model.context() as ctx:
        ctx.feed(tokens)
        ctx.save(tmp_path / "ctx.kv")
    restored = cold.restore(tmp_path / "ctx.kv")
    restored.feed([42])
    assert np.array_equal(restored.logits(), cold_logits(model, [*tokens, 42]))
    restored.close()

    data = bytearray((tmp_path / "ctx.kv").read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / "bad.kv").write_bytes(bytes(data))
    before = model.kv_stats()
    with pytest.raises(SnapshotCorrupt, match="checksum"):
        model.restore(tmp_path / "bad.kv")
    other = llamay.load(QWEN2, threads=1)
    with model.context() as ctx:
        ctx.feed([1, 2, 3])
        ctx.save(tmp_path / "gemma.kv")
    with pytest.raises(SnapshotMismatch, match=model.fingerprint):
        other.restore(tmp_path / "gemma.kv")
    assert other.kv_stats()["pages_used"] == 0
    assert model.kv_stats()["pages_used"] == before["pages_used"]


def test_a_context_sharing_a_cached_prefix_allocates_only_its_new_pages(model, cold, prompt):
    with model.context() as first:
        first.feed(prompt)
    used = model.kv_stats()["pages_used"]
    ctx = model.context()
    ctx.feed([*prompt, 7, 8, 9])
    assert model.kv_stats()["pages_used"] == used + 1
    assert np.array_equal(ctx.logits(), cold_logits(cold, [*prompt, 7, 8, 9]))
    ctx.close()
