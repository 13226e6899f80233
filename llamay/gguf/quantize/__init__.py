"""Quantize a GGUF model file as llama-quantize does: the same tensor types, the same bytes.

    from llamay.gguf.quantize import QuantizeOptions, quantize
    quantize("model-F16.gguf", "model-Q4_K_M.gguf", QuantizeOptions("Q4_K_M"))

file_types.py names what is written, rules.py decides each tensor's type, imatrix.py reads
importance matrices, plan.py settles the output (and every refusal) before a byte is written,
convert.py streams the tensors through the C quantizers on every thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from llamay.errors import UnsupportedQuantization
from llamay.gguf.quantize.convert import carry_out, default_threads
from llamay.gguf.quantize.file_types import ALIASES, DECLINED, FILE_TYPES, FileType, file_type
from llamay.gguf.quantize.imatrix import ImportanceMatrix, read_imatrix, write_imatrix
from llamay.gguf.quantize.plan import Plan, QuantizeOptions, Step, file_order, make_plan
from llamay.gguf.reader import read
from llamay.gguf.writer import write_streamed

__all__ = [
    "ALIASES",
    "DECLINED",
    "FILE_TYPES",
    "FileType",
    "ImportanceMatrix",
    "Plan",
    "QuantizeOptions",
    "Step",
    "UnsupportedQuantization",
    "default_threads",
    "file_order",
    "file_type",
    "make_plan",
    "plan_file",
    "quantize",
    "read_imatrix",
    "write_imatrix",
]


def plan_file(source: str | os.PathLike[str], options: QuantizeOptions) -> Plan:
    """What quantizing `source` would write, every refusal made; nothing is written."""
    imatrix = read_imatrix(options.imatrix) if options.imatrix is not None else None
    return make_plan(read(source), options, imatrix)


def quantize(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    options: QuantizeOptions,
    *,
    threads: int | None = None,
    progress: Callable[[int], None] | None = None,
    plan: Plan | None = None,
) -> Plan:
    """Quantize the GGUF file `source` into `destination` (written whole or not at all: a
    temporary file, fsynced, renamed). `progress(n)` hears of every n input bytes done; `plan`
    is plan_file's, where the caller made it first. Returns the plan carried out."""
    plan = plan if plan is not None else plan_file(source, options)
    write_streamed(
        Path(destination),
        plan.metadata,
        [step.info for step in plan.steps],
        lambda out: carry_out(plan, out, threads, progress),
    )
    return plan
