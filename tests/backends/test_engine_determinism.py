"""Logits are bit-identical across thread counts, batch shapes, batch company and kernel sets.

Every comparison is `np.array_equal`. Models: the gemma2 synth file (sliding window of 128
on two layers, soft-caps, GQA) and a Qwen 2 synth file (biases, a second family), Q8_0 weights
and F16 KV as users run them; the prompt is long enough to slide past the window. The Mistral
synth file has one KV head for four query heads: a decode step there has fewer (token, KV
head) pairs than threads, and threads split each pair's query heads, or past 512 positions its
spans of positions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import llamay

SYNTH = Path(__file__).parent.parent / "data" / "synth"
MODELS = ["gemma2-Q8_0.gguf", "qwen2-Q8_0.gguf", "mistral-Q8_0.gguf"]
TEXT = (Path(__file__).parent.parent / "data" / "texts" / "gpl-2.txt").read_text()


def prompt(model: llamay.engine.Model, n: int = 150, offset: int = 0) -> list[int]:
    return model.tokenize(TEXT[offset:])[:n]


def whole(model: llamay.engine.Model, ids: list[int]) -> np.ndarray:
    with model.context() as ctx:
        return ctx.feed(ids, all_logits=True)


@pytest.fixture(scope="module", params=MODELS)
def path(request) -> Path:
    return SYNTH / request.param


def test_thread_counts_give_the_same_bits(path):
    logits = [whole(llamay.load(path, threads=t), prompt(llamay.load(path))) for t in (1, 2, 3)]
    assert np.array_equal(logits[0], logits[1])
    assert np.array_equal(logits[0], logits[2])


def test_decode_steps_give_the_same_bits_at_every_thread_count(path):
    def steps(threads: int) -> np.ndarray:
        model = llamay.load(path, threads=threads)
        with model.context() as ctx:
            return np.concatenate([ctx.feed([t], all_logits=True) for t in prompt(model, 90)])

    one = steps(1)
    assert np.array_equal(steps(2), one)
    assert np.array_equal(steps(3), one)


def test_steps_past_a_span_give_the_same_bits_at_every_thread_count(path):
    """Deeper than a span (256 positions), a step of a few tokens whose (token, KV head) pairs
    do not share out evenly among the threads (one KV head on two or three threads, two on
    three) computes attention span by span on several threads and merges the spans in order:
    the bits of the whole prompt in one pass on one thread."""
    ids = prompt(llamay.load(path), 1100)
    expected = whole(llamay.load(path, threads=1), ids)
    for threads in (2, 3):
        model = llamay.load(path, threads=threads)
        with model.context() as ctx:
            ctx.feed(ids[:1080])
            got = [ctx.feed(ids[i : i + n], all_logits=True) for i, n in [(1080, 1), (1081, 2)]]
            got += [ctx.feed([token], all_logits=True) for token in ids[1083:]]
        assert np.array_equal(np.concatenate(got), expected[1080:]), threads


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_shapes_give_the_same_bits(path, threads):
    """Whole prompt, chunks of 7, token by token, steps cut by a small n_batch."""
    model = llamay.load(path, threads=threads)
    ids = prompt(model)
    expected = whole(model, ids)
    with model.context() as ctx:
        chunks = [ctx.feed(ids[i : i + 7], all_logits=True) for i in range(0, len(ids), 7)]
    assert np.array_equal(np.concatenate(chunks), expected)
    with model.context() as ctx:
        singles = [ctx.feed([token], all_logits=True) for token in ids]
    assert np.array_equal(np.concatenate(singles), expected)
    assert np.array_equal(whole(llamay.load(path, threads=threads, n_batch=5), ids), expected)


def test_a_sequence_batched_beside_others_gives_the_same_bits(path):
    model = llamay.load(path, threads=2)
    ids = prompt(model)
    expected = whole(model, ids)
    a, b, c = model.context(), model.context(), model.context()
    b.feed(prompt(model, 40, offset=500))
    # a's prompt in three forward passes, each shared with other contexts at other positions
    out = model.forward_batch([(b, prompt(model, 9, 900)), (a, ids[:50])], want_logits="all")
    got = [out[1]]
    out = model.forward_batch(
        [(c, prompt(model, 30, 2000)), (a, ids[50:51]), (b, [5])], want_logits="all"
    )
    got.append(out[1])
    out = model.forward_batch([(a, ids[51:]), (c, prompt(model, 3, 3000))], want_logits="all")
    got.append(out[0])
    assert np.array_equal(np.concatenate(got), expected)
    assert np.array_equal(a.logits(), expected[-1])
    assert a.tokens == ids


def test_last_logits_equal_the_last_row_of_all_logits(path):
    model = llamay.load(path, threads=1)
    ids = prompt(model, 40)
    with model.context() as ctx:
        ctx.feed(ids[:20])
        ctx.feed(ids[20:])
        assert np.array_equal(ctx.logits(), whole(model, ids)[-1])


def test_kernel_sets_give_the_same_bits(path):
    ids = prompt(llamay.load(path), 70)
    sets = llamay._core.engine.kernel_sets()
    logits = [whole(llamay.load(path, threads=2, kernels=k), ids) for k in sets]
    for other in logits[1:]:
        assert np.array_equal(other, logits[0])


@pytest.mark.parametrize("kv_type", ["F16", "F32"])
@pytest.mark.parametrize("page_tokens", [16, 64])
def test_every_kv_layout_is_deterministic(path, kv_type, page_tokens):
    """Each KV type and page size has its own bits (the tile size sets the softmax's update
    points), and within one, the batch shape changes nothing."""
    model = llamay.load(path, threads=2, kv_type=kv_type, page_tokens=page_tokens)
    ids = prompt(model)
    expected = whole(model, ids)
    with model.context() as ctx:
        chunks = [ctx.feed(ids[i : i + 13], all_logits=True) for i in range(0, len(ids), 13)]
    assert np.array_equal(np.concatenate(chunks), expected)


def test_prefill_and_decode_write_the_same_kv_bytes(path):
    """What prefix reuse rests on: the pages a prompt leaves are the same, byte for byte,
    whether it was fed whole or token by token."""
    model = llamay.load(path, threads=2)
    ids = prompt(model, 70)
    storage = model.kv_cache.storage
    whole_ctx, single_ctx = model.context(), model.context()
    whole_ctx.feed(ids)
    for token in ids:
        single_ctx.feed([token])
    for a, b in zip(whole_ctx.pages, single_ctx.pages, strict=True):
        assert storage.read(a) == storage.read(b)
