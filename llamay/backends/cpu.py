"""The CPU backend: the Cython + C kernels of llamay._core.

Its executor is `_core.engine.Engine` (the weights packed into huge pages, one C call and one
parallel region per step) over a `_core.pages.PageMemory`. Every kernel set ("reference" plain
C, "avx2", "avx512", "neon") computes the same bits, so they share one determinism class: a
snapshot written with one restores on a machine with another. The set is the best this CPU
runs, unless `kernels=` or the LLAMAY_KERNELS environment variable names one.
"""

from __future__ import annotations

import os

from llamay._core import _cpu
from llamay._core.engine import Engine
from llamay._core.pages import PageMemory
from llamay.backends.base import Batch
from llamay.errors import LlamayError
from llamay.models.spec import ModelSpec
from llamay.state.layout import KVLayout


def kernel_set(kernels: str | None) -> str:
    """The kernel set a model runs: `kernels`, else $LLAMAY_KERNELS, else the best this CPU
    runs. A name llamay does not know is a LlamayError naming where it came from; a set this
    build or CPU cannot run, llamay.UnsupportedCPU naming what the CPU lacks."""
    source = "kernels="
    if kernels is None:
        kernels = os.environ.get("LLAMAY_KERNELS") or "best"
        source = "LLAMAY_KERNELS"
    try:
        return _cpu.check(kernels)
    except ValueError as exc:
        raise LlamayError(f"{source}: {exc}") from None


class CpuExecutor:
    def __init__(
        self,
        spec: ModelSpec,
        layout: KVLayout,
        n_pages: int,
        threads: int,
        max_tokens: int,
        kernels: str | None,
    ) -> None:
        self.storage = PageMemory(
            layout.n_layers,
            layout.n_kv_heads,
            layout.head_dim,
            layout.page_tokens,
            layout.dtype,
            n_pages,
        )
        self._engine = Engine(spec, self.storage, threads, max_tokens, kernel_set(kernels))
        self.kernels: str = self._engine.kernels
        self.max_tokens: int = max_tokens
        self.threads: int = threads

    @property
    def packed_bytes(self) -> int:
        """The huge-page region of the weight matrices."""
        return self._engine.packed_bytes

    def step(self, batch: Batch) -> None:
        self._engine.step(
            batch.tokens,
            batch.positions,
            batch.sequence,
            batch.page_tables,
            batch.outputs,
            batch.out,
            batch.hidden,
        )

    def close(self) -> None:
        self._engine.close()


class CpuBackend:
    name = "cpu"
    # The class names the arithmetic, so it changes with any canonical order: "cpu" computed a
    # score from four partial sums, "cpu-2" from one chain over the chunks (the attention rework
    # for decode at depth). A snapshot of the older class is refused: its KV would differ in the last
    # bits from what this build computes, and a continuation would not match a cold run.
    determinism = "cpu-2"

    def bind(
        self,
        spec: ModelSpec,
        layout: KVLayout,
        n_pages: int,
        *,
        threads: int,
        max_tokens: int,
        kernels: str | None,
    ) -> CpuExecutor:
        return CpuExecutor(spec, layout, n_pages, threads, max_tokens, kernels)
