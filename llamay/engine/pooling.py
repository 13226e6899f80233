"""From a sequence's hidden states to what an embedding or reranking model answers, as
llama.cpp's build_pooling computes it: the mean over the tokens, the first token (CLS), the
last one, or (rank) a cross-encoder's classification head on the first token; then, for
embeddings, Matryoshka truncation and unit length.

Each sequence is pooled from its own rows alone, so a result never depends on which other
sequences shared its forward pass.
"""

from __future__ import annotations

import numpy as np

from llamay.errors import LlamayError
from llamay.models.spec import Linear, ModelSpec


def pooled(hidden: np.ndarray, pooling: str) -> np.ndarray:
    """One sequence's vector from its hidden states (n_tokens, n_embd): "mean" ("none" too:
    a decoder's embedding is the mean of its final-normed states), "cls" (and "rank"): the
    first row, "last": the last row."""
    if pooling in ("cls", "rank"):
        return hidden[0].astype(np.float32)
    if pooling == "last":
        return hidden[-1].astype(np.float32)
    return hidden.astype(np.float64).mean(axis=0).astype(np.float32)


def finished(vector: np.ndarray, normalize: bool, dimensions: int | None) -> np.ndarray:
    """The first `dimensions` components (all with None), then scaled to unit length where
    `normalize` (OpenAI's `dimensions`: truncate, then renormalize)."""
    if dimensions is not None:
        if isinstance(dimensions, bool) or not 1 <= int(dimensions) <= len(vector):
            raise ValueError(f"dimensions must be from 1 to {len(vector)}, not {dimensions!r}")
        vector = vector[: int(dimensions)]
    if normalize:
        vector = vector.astype(np.float64)
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return vector.astype(np.float32)


class RankHead:
    """A cross-encoder's classification head (llama.cpp's LLAMA_POOLING_TYPE_RANK):
    tanh(cls x + cls_b), then cls.output (+ its bias) where the model has it. The matrices are
    dequantized once, to float32."""

    def __init__(self, spec: ModelSpec) -> None:
        if spec.cls is None:
            raise LlamayError("the model has no classification head: it is not a reranker")
        self.cls = _dense(spec.cls)
        self.cls_out = None if spec.cls_out is None else _dense(spec.cls_out)

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """The head's outputs for one pooled vector: n_cls_out floats (the first is the
        relevance score)."""
        w, b = self.cls
        y = np.tanh(w @ vector + b).astype(np.float32)
        if self.cls_out is not None:
            w, b = self.cls_out
            y = (w @ y + b).astype(np.float32)
        return y


def _dense(linear: Linear) -> tuple[np.ndarray, np.ndarray]:
    w = np.ascontiguousarray(linear.tensor.dequantize(), dtype=np.float32)
    w = w.reshape(linear.n_rows, linear.n_cols)
    b = np.zeros(linear.n_rows, np.float32) if linear.bias is None else linear.bias
    return w, b
