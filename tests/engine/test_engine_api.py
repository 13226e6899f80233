"""llamay.load, Model and Context as CONTRACT.md describes them: state, page accounting and the
errors a user meets (full contexts, a full KV cache, files llamay does not run)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay import gguf
from llamay.errors import ContextOverflow, LlamayError, UnsupportedModel

from helpers.tiny import vocabulary, write_tiny

LLAMA = Path(__file__).parent.parent / "data" / "synth" / "llama2-spm-Q8_0.gguf"


@pytest.fixture(scope="module")
def model() -> llamay.engine.Model:
    return llamay.load(LLAMA, threads=1, n_ctx=100)


def test_load_reads_the_model_and_its_tokenizer(model):
    assert model.arch == "llama"
    assert model.n_vocab == 2048 and model.n_ctx == 100
    assert model.tokenize("The license") == [1, 450, 301, 293, 264, 344]  # llama.cpp's ids
    assert model.detokenize(model.tokenize("The license", add_bos=False)) == "The license"
    assert "Hello there" in model.chat_template.render([{"role": "user", "content": "Hello there"}])
    assert llamay.load(LLAMA).threads == len(os.sched_getaffinity(0))
    assert llamay.load(LLAMA).n_ctx == 2048  # the training context, under the 4096 default


def test_a_context_feeds_and_keeps_its_tokens_and_pages(model):
    before = model.kv_stats()["pages_used"]
    ctx = model.context()
    assert ctx.tokens == [] and ctx.n_tokens == 0
    with pytest.raises(LlamayError, match="feed it tokens first"):
        ctx.logits()
    ids = model.tokenize("You may copy and distribute verbatim copies of the Program")
    assert ctx.feed(ids) is None
    logits = ctx.logits()
    assert logits.shape == (model.n_vocab,) and logits.dtype == np.float32
    logits[:] = 0  # a copy: the context's logits do not change
    assert ctx.logits().any()
    assert ctx.tokens == ids and ctx.n_tokens == len(ids)
    n_pages = -(-len(ids) // model.page_tokens)
    assert len(ctx.pages) == n_pages
    assert model.kv_stats()["pages_used"] == before + n_pages
    ctx.close()
    assert model.kv_stats()["pages_used"] == before
    with pytest.raises(LlamayError, match="closed"):
        ctx.feed([1])


def test_kv_stats(model):
    stats = model.kv_stats()
    assert stats["page_tokens"] == 32
    assert stats["pages_used"] + stats["pages_free"] == stats["pages_total"]
    assert stats["pages_total"] == 4 * 4  # four contexts of 100 tokens, in pages of 32


def test_feeding_past_n_ctx_raises_and_changes_nothing(model):
    with model.context() as ctx:
        ctx.feed([1] * 90)
        logits = ctx.logits()
        pages = model.kv_stats()["pages_used"]
        with pytest.raises(ContextOverflow, match=r"90 tokens plus 11 new ones exceed n_ctx = 100"):
            ctx.feed([5] * 11)
        assert ctx.n_tokens == 90 and np.array_equal(ctx.logits(), logits)
        assert model.kv_stats()["pages_used"] == pages
        ctx.feed([5] * 10)  # exactly full
        assert ctx.n_tokens == 100


def test_a_full_kv_cache_raises_and_allocates_nothing():
    model = llamay.load(LLAMA, threads=1, n_ctx=100, kv_memory="300KiB")  # two pages of 128 KiB
    assert model.kv_stats()["pages_total"] == 2
    a, b = model.context(), model.context()
    a.feed([1] * 40)
    with pytest.raises(ContextOverflow, match="KV cache is full"):
        model.forward_batch([(a, [5] * 10), (b, [1] * 10)])
    assert model.kv_stats()["pages_used"] == 2 and a.n_tokens == 40 and b.n_tokens == 0


def test_a_kv_cache_past_any_memory_is_refused_at_load():
    # 2^31 pages and more (page ids are int32) are refused before anything is allocated
    with pytest.raises(LlamayError, match="does not fit in memory"):
        llamay.load(LLAMA, threads=1, n_ctx=100, kv_memory=2**60)


def test_forward_batch_checks_its_items(model):
    ctx = model.context()
    with pytest.raises(ValueError, match="token id 2048 is out of range"):
        ctx.feed([1, 2048])
    with pytest.raises(ValueError, match="appears twice"):
        model.forward_batch([(ctx, [1]), (ctx, [2])])
    with pytest.raises(ValueError, match="want_logits"):
        model.forward_batch([(ctx, [1])], want_logits="some")
    assert ctx.n_tokens == 0 and model.forward_batch([(ctx, [1])], want_logits="none") is None
    with pytest.raises(LlamayError, match="no logits yet"):
        ctx.logits()


def test_all_logits_are_one_row_per_fed_token(model):
    with model.context() as ctx:
        ids = model.tokenize("This License applies to any program")
        logits = ctx.feed(ids, all_logits=True)
        assert logits.shape == (len(ids), model.n_vocab)
        assert np.array_equal(logits[-1], ctx.logits())


def test_a_closed_model_runs_no_step():
    model = llamay.load(LLAMA, threads=1)
    ctx = model.context()
    model.close()
    with pytest.raises(LlamayError, match="closed"):
        ctx.feed([1])


def test_unsupported_files_are_refused_at_load(tmp_path):
    with pytest.raises(UnsupportedModel, match="load_tokenizer"):
        llamay.load(gguf.write(tmp_path / "vocab.gguf", vocabulary(), {}))
    mamba = gguf.write(tmp_path / "m.gguf", {"general.architecture": "mamba"}, {})
    with pytest.raises(UnsupportedModel, match="state-space"):
        llamay.load(mamba)


def test_heads_the_attention_cannot_take_are_refused(tmp_path):
    path = write_tiny(tmp_path / "m.gguf", "llama", head_dim=24)
    with pytest.raises(UnsupportedModel, match="heads of 24 dimensions"):
        llamay.load(path)
    # a span's output waits on the stack to be folded (csrc/kernels_body.h): 1,024 at most
    path = write_tiny(tmp_path / "wide.gguf", "llama", head_dim=1040)
    with pytest.raises(UnsupportedModel, match=r"heads of 1040 dimensions.*at most 1024"):
        llamay.load(path)
