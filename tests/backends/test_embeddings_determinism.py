"""Embeddings and rerank scores are the same bits whatever shares their forward pass, whatever
the thread count, and whichever kernel set: `llamay verify`'s promises, for encoders."""

from __future__ import annotations

import numpy as np
import pytest

import llamay

from helpers import embeddings

TEXTS = embeddings.texts()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("encoders")
    return {
        name: embeddings.model_file(name, directory)
        for name in ("bert-mean-Q8_0", "nomic-bert-Q8_0", "bert-rerank-Q8_0")
    }


def outputs(path, threads: int, batched: bool, kernels: str = "best") -> list[np.ndarray]:
    model = llamay.load(path, threads=threads, kernels=kernels)
    try:
        if model.is_reranker:
            ids = [model.tokenize(t) for t in TEXTS]
            if batched:
                return [np.array(model.rerank_ids(ids))]
            return [np.array(model.rerank_ids([one])) for one in ids]
        if batched:
            return model.embed_many(TEXTS)
        return [model.embed(text) for text in reversed(TEXTS)][::-1]
    finally:
        model.close()


@pytest.mark.parametrize("name", ["bert-mean-Q8_0", "nomic-bert-Q8_0", "bert-rerank-Q8_0"])
def test_batch_and_threads_do_not_change_a_bit(files, name):
    alone = outputs(files[name], threads=1, batched=False)
    together = outputs(files[name], threads=2, batched=True)
    assert np.array_equal(np.concatenate(alone), np.concatenate(together))


def test_kernel_sets_agree(files):
    from llamay._core.engine import kernel_sets

    results = [np.concatenate(outputs(files["bert-mean-Q8_0"], 2, True, k)) for k in kernel_sets()]
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_the_causal_mask_would_be_seen(files, monkeypatch):
    """A prefix's embedding differs from the whole text's only through the later tokens: with
    bidirectional attention the first token's state depends on what follows it."""
    model = llamay.load(files["bert-mean-Q8_0"], threads=2)
    try:
        ids = model.tokenize(TEXTS[1])
        with model.context() as a, model.context() as b:
            whole, part = model.forward_batch([(a, ids), (b, ids[:5])], "hidden")
        assert not np.array_equal(whole[0], part[0])
    finally:
        model.close()


def test_matryoshka_dimensions(files):
    model = llamay.load(files["bert-mean-Q8_0"], threads=2)
    try:
        full = model.embed(TEXTS[2], normalize=False)
        short = model.embed(TEXTS[2], dimensions=32)
        assert short.shape == (32,)
        assert np.allclose(short, full[:32] / np.linalg.norm(full[:32].astype(np.float64)))
        assert abs(float(np.linalg.norm(short.astype(np.float64))) - 1.0) < 1e-6
        with pytest.raises(ValueError, match="dimensions"):
            model.embed(TEXTS[2], dimensions=model.n_embd + 1)
    finally:
        model.close()


def test_a_reranker_gives_no_embeddings_and_an_embedder_no_scores(files):
    for name, call in (
        ("bert-rerank-Q8_0", lambda m: m.embed("x")),
        ("bert-mean-Q8_0", lambda m: m.rerank("q", ["d"])),
    ):
        model = llamay.load(files[name], threads=1)
        try:
            with pytest.raises(llamay.LlamayError, match="reranker"):
                call(model)
        finally:
            model.close()


def test_an_encoder_context_takes_one_feed(files):
    model = llamay.load(files["bert-mean-Q8_0"], threads=1)
    try:
        with model.context() as ctx:
            model.forward_batch([(ctx, [101, 200])], "hidden")
            with pytest.raises(llamay.LlamayError, match="encoder"):
                model.forward_batch([(ctx, [300])], "hidden")
    finally:
        model.close()


@pytest.mark.parametrize("name", ["bert-mean-Q8_0", "bert-rerank-Q8_0"])
def test_llamay_verify_runs_the_encoder_checks(files, name):
    from llamay.verify import run_checks

    checks = list(run_checks(files[name]))
    assert [c.name.split(" (")[0] for c in checks] == [
        "embedding thread counts",
        "embedding batch company",
    ]
    assert all(c.passed for c in checks), [c.figure for c in checks]
