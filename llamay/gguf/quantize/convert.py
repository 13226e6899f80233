"""Carrying out a plan: each tensor read from the input in slabs of rows, converted on every
thread, checked as llama.cpp checks it, and written; nothing is held but a slab.

Threads split a slab's rows (never a row, nor an expert's rows across importance slices), and
each row's bytes depend on that row alone, so the file is the same for any thread count.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from llamay._core import quants as _kernels
from llamay.errors import ModelFormatError, UnsupportedQuantization
from llamay.gguf.quantize.plan import Plan, Step
from llamay.gguf.reader import FileSpan
from llamay.gguf.types import BY_NAME
from llamay.gguf.writer import TensorWriter

SLAB_BYTES = 64 << 20  # of input read at a time
TASK_ELEMENTS = 1 << 18  # per thread's turn: big enough to outweigh handing it out


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def carry_out(
    plan: Plan,
    out: TensorWriter,
    threads: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Write the plan's tensors through `out`; `progress(n)` after each n input bytes."""
    if not plan.steps:
        return
    threads = threads or default_threads()
    pool = (
        ThreadPoolExecutor(threads, thread_name_prefix="llamay-quantize") if threads > 1 else None
    )
    reader = _Reader(plan.steps[0].source.span)
    try:
        buffers = _Buffers()
        for step in plan.steps:
            _tensor(step, reader, out, pool, buffers, progress)
    finally:
        reader.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class _Reader:
    """The input file, read by offset (a read copies from the page cache; pages touched through
    a mapping would stay in the resident set)."""

    def __init__(self, span: FileSpan | None) -> None:
        if span is None:
            raise ValueError("tensors with no file to read them from")
        self.path = span.path
        self.fd = span.open()  # refuses a file replaced since it was parsed

    def read_into(self, buf: np.ndarray, offset: int) -> None:
        view = memoryview(buf).cast("B")
        done = 0
        while done < len(view):
            n = os.preadv(self.fd, [view[done:]], offset + done)
            if n == 0:
                raise ModelFormatError(
                    f"{self.path}: the file ends at byte {offset + done}, in a tensor's data "
                    "(it was truncated while being read)"
                )
            done += n

    def close(self) -> None:
        os.close(self.fd)


class _Buffers:
    """A slab's input and output bytes, reused from tensor to tensor."""

    def __init__(self) -> None:
        self.src = np.empty(0, np.uint8)
        self.dst = np.empty(0, np.uint8)

    def get(self, src_bytes: int, dst_bytes: int) -> tuple[np.ndarray, np.ndarray]:
        if self.src.size < src_bytes:
            self.src = np.empty(src_bytes, np.uint8)
        if self.dst.size < dst_bytes:
            self.dst = np.empty(dst_bytes, np.uint8)
        return self.src[:src_bytes], self.dst[:dst_bytes]


def _tensor(
    step: Step,
    reader: _Reader,
    out: TensorWriter,
    pool: ThreadPoolExecutor | None,
    buffers: _Buffers,
    progress: Callable[[int], None] | None,
) -> None:
    source, target = step.source.ggml_type, BY_NAME[step.info.type]
    shape = step.source.shape
    n_per_row = shape[0]
    n_rows = step.source.n_elements // n_per_row if n_per_row else 0
    rows_per_expert = shape[1] if len(shape) > 1 else 1
    in_row, out_row = source.nbytes(n_per_row), target.nbytes(n_per_row)
    rows_per_slab = max(1, SLAB_BYTES // max(1, in_row))
    start = step.source.span.start
    for first in range(0, n_rows, rows_per_slab):
        rows = min(rows_per_slab, n_rows - first)
        src, dst = buffers.get(rows * in_row, rows * out_row if step.converts else 0)
        reader.read_into(src, start + first * in_row)
        bad = _kernels.first_invalid_block(source.id, src)
        if bad >= 0:  # llama.cpp refuses to read an inf or NaN (a value, or a block's scale)
            block = bad + first * (n_per_row // source.block_elems)
            raise ModelFormatError(
                f"{reader.path}: tensor {step.source.name!r} holds an infinite or NaN value "
                f"(in its block {block})"
            )
        if not step.converts:
            out.write(src)
        else:
            tasks = _tasks(first, rows, rows_per_expert, n_per_row)
            args = [
                (source.id, src[a * in_row : b * in_row], target.id, dst[a * out_row : b * out_row],
                 b - a, n_per_row, _slice(step.weights, expert, n_per_row))
                for a, b, expert in tasks
            ]  # fmt: skip
            _run(pool, args)
            if _kernels.first_invalid_block(target.id, dst) >= 0:  # nor to write one
                raise UnsupportedQuantization(
                    f"{step.source.name} as {target.name}: a scale overflows (values beyond "
                    "what the type's fp16 scales hold), as llama-quantize would also find"
                )
            out.write(dst)
        if progress is not None:
            progress(rows * in_row)


def _tasks(first: int, rows: int, rows_per_expert: int, n_per_row: int):
    """(start, end, expert) row ranges of a slab, relative to it: about TASK_ELEMENTS values
    each, none crossing from one expert to the next."""
    per_task = max(1, TASK_ELEMENTS // max(1, n_per_row))
    a = 0
    while a < rows:
        expert = (first + a) // rows_per_expert
        expert_end = (expert + 1) * rows_per_expert - first
        b = min(a + per_task, rows, expert_end)
        yield a, b, expert
        a = b


def _slice(weights: np.ndarray | None, expert: int, n_per_row: int) -> np.ndarray | None:
    if weights is None:
        return None
    return weights[expert * n_per_row : (expert + 1) * n_per_row]


def _run(pool: ThreadPoolExecutor | None, args: list[tuple]) -> None:
    if pool is None:
        for a in args:
            _kernels.convert_rows(*a)
        return
    futures: list[Future] = [pool.submit(_kernels.convert_rows, *a) for a in args]
    try:
        for future in futures:
            future.result()
    except BaseException:  # Ctrl-C among them: let the running ones end, start no more
        for future in futures:
            future.cancel()
        for future in futures:
            if not future.cancelled():
                future.exception()
        raise
