"""Quantized models in the store: `llamay quantize NAME NEWNAME TYPE`, and Ollama's create
with `quantize`. The new file becomes a blob like any other; the new name keeps its source's
template, system prompt, parameters and license where the source is a stored name."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from pathlib import Path

from llamay.gguf.quantize import Plan, QuantizeOptions, plan_file, quantize
from llamay.paths import temp_prefix
from llamay.store.blobs import commit
from llamay.store.catalog import ModelEntry, create
from llamay.store.locks import store_lock
from llamay.store.paths import blobs_dir


def store_quantized(
    source: Path,
    name: str,
    options: QuantizeOptions,
    *,
    base: str | None = None,
    template: str | None = None,
    system: str | None = None,
    params: dict | None = None,
    license: str | None = None,
    threads: int | None = None,
    progress: Callable[[int], None] | None = None,
    plan: Plan | None = None,
) -> ModelEntry:
    """Quantize the GGUF file `source` and store it as `name`, with the other layers of the
    stored model `base` (if given) and the texts given replacing theirs. `plan` is
    plan_file(source, options)'s, where the caller made it to check first."""
    plan = plan if plan is not None else plan_file(source, options)
    # under the store lock, shared: prune must not take the blob before the name uses it
    with store_lock(exclusive=False):
        partial = blobs_dir() / f"{temp_prefix('.quantize')}{secrets.token_hex(6)}.partial"
        try:
            quantize(source, partial, options, threads=threads, progress=progress, plan=plan)
            digest = commit(partial, None, f"the quantized {name}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        return create(
            name,
            from_=base,
            model_digest=digest,
            template=template,
            system=system,
            params=params,
            license=license,
        )
