"""The reference backend: the float64 spec of every family (forward.py), runnable.

It stores its KV pages in a NumPy array in the canonical layout (state/layout.py), in the KV
dtype, as the CPU backend's memory does; it computes everything else in float64, one token at a
time. Slow (for the tiny synthetic models of the tests and for checking the CPU backend), and
batch-invariant like every backend. Its determinism class is its own: its bits come from NumPy's
float64 arithmetic and the BLAS under it, so its snapshots restore only on the reference backend,
and across machines only where their NumPy builds agree.
"""

from __future__ import annotations

import sys

import numpy as np

from llamay.backends.base import Batch
from llamay.backends.reference.forward import ReferenceForward
from llamay.errors import LlamayError
from llamay.models.spec import ModelSpec
from llamay.state.layout import FLOAT_KV_ELEMENTS, KVLayout

# Q8_0 is the CPU backend's: the float64 spec has no quantized KV
REFERENCE_KV_TYPES = {name: e.newbyteorder("=") for name, e in FLOAT_KV_ELEMENTS.items()}


class NumpyPages:
    """Pages as one array (n_pages, n_layers, 2, n_kv_heads, page_tokens, head_dim)."""

    def __init__(self, layout: KVLayout, n_pages: int) -> None:
        if layout.dtype not in REFERENCE_KV_TYPES:
            raise LlamayError(
                f"the reference backend keeps its KV cache as {' or '.join(REFERENCE_KV_TYPES)}, "
                f"not {layout.dtype}"
            )
        self.layout = layout
        self.array = np.zeros(
            (n_pages, layout.n_layers, 2, layout.n_kv_heads, layout.page_tokens, layout.head_dim),
            dtype=REFERENCE_KV_TYPES[layout.dtype],
        )

    def taking(self, pages: np.ndarray) -> None:
        pass  # NumPy takes memory as pages are written; there is nothing to prepare

    def copy(self, src: int, dst: int) -> None:
        if src == dst:
            raise ValueError(f"copy: source and destination are the same page ({src})")
        self.array[dst] = self.array[src]

    def zero(self, page: int) -> None:
        self.array[page] = 0

    def read(self, page: int) -> bytes:
        little = self.array.dtype.newbyteorder("<")
        return self.array[page].astype(little, copy=sys.byteorder != "little").tobytes()

    def write(self, page: int, raw: bytes | memoryview) -> None:
        if len(raw) != self.layout.page_bytes:
            raise ValueError(f"a page has {self.layout.page_bytes} bytes, not {len(raw)}")
        little = self.array.dtype.newbyteorder("<")
        self.array[page] = np.frombuffer(raw, dtype=little).reshape(self.array.shape[1:])


class ReferenceExecutor:
    kernels = "float64"

    def __init__(self, spec: ModelSpec, layout: KVLayout, n_pages: int, max_tokens: int) -> None:
        if layout.n_kv_heads < max(spec.hparams.n_head_kv) or layout.n_layers != len(spec.layers):
            raise ValueError("the KV layout does not fit the model")
        self.storage = NumpyPages(layout, n_pages)
        self.max_tokens = max_tokens
        self._forward = ReferenceForward(spec)
        self._closed = False

    def step(self, batch: Batch) -> None:
        if self._closed:
            raise ValueError("this executor is closed")
        n_pages = self.storage.array.shape[0]
        if any(len(t) and (t.min() < 0 or t.max() >= n_pages) for t in batch.page_tables):
            raise ValueError("a page table names a page outside the KV memory")
        tables = [batch.page_tables[s] for s in batch.sequence.tolist()]
        # an encoder's token sees its sequence up to the sequence's last position in the step
        ends = np.full(len(batch.page_tables), -1, dtype=np.int64)
        np.maximum.at(ends, batch.sequence, batch.positions)
        out = self._forward.step(
            batch.tokens,
            batch.positions,
            tables,
            self.storage.array,
            batch.outputs,
            batch.hidden,
            ends[batch.sequence],
        )
        batch.out[...] = out

    def close(self) -> None:
        self._closed = True


class ReferenceBackend:
    name = "reference"
    determinism = "reference-float64"

    def bind(
        self,
        spec: ModelSpec,
        layout: KVLayout,
        n_pages: int,
        *,
        threads: int,
        max_tokens: int,
        kernels: str | None,
    ) -> ReferenceExecutor:
        if kernels not in (None, "best", "float64"):
            raise ValueError(f"the reference backend has one kernel set, float64, not {kernels!r}")
        return ReferenceExecutor(spec, layout, n_pages, max_tokens)
