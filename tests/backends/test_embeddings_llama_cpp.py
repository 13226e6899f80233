"""The encoders (BERT, nomic-bert, a BERT cross-encoder) against llama.cpp.

tests/data/embeddings holds llama.cpp's pooled vectors (mean and CLS pooling for BERT, mean for
nomic-bert) and rerank scores of six texts, on synthetic 2-layer models at F16 and Q8_0
(tools/gen_embedding_references.py; the model files are written again from their recipes:
tests/helpers/embeddings.py). The bound for embeddings is a cosine of at least 0.9999 for every
text; llama.cpp against itself (all texts in one batch on one thread) stays above 0.99999998,
and llamay's lowest is 0.99997 (BERT, CLS pooling, Q8_0; docs/models.md has the table). Rerank
scores must be within 0.02 of llama.cpp's and rank the texts alike (llamay is 0.012 off at Q8_0,
3e-4 at F16; Q8_0 against F16 moves llama.cpp's scores by 0.03). Switching any one feature off
(tests/helpers/drops.py) takes the measure far outside its bound.
"""

from __future__ import annotations

import numpy as np
import pytest

import llamay

from helpers import embeddings
from helpers.drops import dropped

MIN_COSINE = 0.9999
SCORE_TOLERANCE = 0.02


def vectors(path, backend: str = "cpu") -> list[np.ndarray]:
    model = llamay.load(path, threads=2, backend=backend)
    try:
        if model.is_reranker:
            # llama.cpp's scores of each text alone (no query): the head on its CLS state
            texts = embeddings.texts()
            return [np.array([s]) for s in model.rerank_ids([model.tokenize(t) for t in texts])]
        return model.embed_many(embeddings.texts(), normalize=False)
    finally:
        model.close()


def worst(name: str, ours: list[np.ndarray]) -> float:
    """The lowest cosine to llama.cpp's vector; for a reranker, the largest score difference."""
    ref = embeddings.reference(name)
    if embeddings.index()["files"][name]["pooling"] == 4:
        return max(abs(float(a[0]) - float(b[0])) for a, b in zip(ours, ref, strict=True))
    return min(embeddings.cosine(a, b) for a, b in zip(ours, ref, strict=True))


def within(name: str, measure: float) -> bool:
    if embeddings.index()["files"][name]["pooling"] == 4:
        return measure <= SCORE_TOLERANCE
    return measure >= MIN_COSINE


@pytest.mark.parametrize("name", embeddings.entries())
def test_matches_llama_cpp(tmp_path, name):
    ours = vectors(embeddings.model_file(name, tmp_path))
    assert within(name, worst(name, ours))
    if embeddings.index()["files"][name]["pooling"] == 4:
        ref = embeddings.reference(name)
        order = np.argsort([-float(r[0]) for r in ref], kind="stable")
        assert list(np.argsort([-float(o[0]) for o in ours], kind="stable")) == list(order)


FEATURES = {
    "bert-mean-F16": [
        "bidirectional attention",
        "position embeddings",
        "token type embedding",
        "embedding norm",
        "LayerNorm biases",
        "LayerNorm",
    ],
    "nomic-bert-F16": ["bidirectional attention", "token type embedding"],
    "bert-rerank-F16": ["bidirectional attention", "position embeddings"],
}


@pytest.mark.parametrize(
    ("name", "feature"), [(n, f) for n, features in FEATURES.items() for f in features]
)
def test_each_feature_is_seen(tmp_path, monkeypatch, name, feature):
    path = embeddings.model_file(name, tmp_path)
    dropped(monkeypatch, feature)
    assert not within(name, worst(name, vectors(path)))


@pytest.mark.parametrize("name", [n for n in embeddings.entries() if n.endswith("-F16")])
def test_reference_backend_matches_llama_cpp(tmp_path, name):
    """The float64 spec too (F16 files: with Q8_0 weights llama.cpp, like the CPU backend,
    quantizes the activations the reference keeps exact)."""
    ours = vectors(embeddings.model_file(name, tmp_path), backend="reference")
    assert within(name, worst(name, ours))
