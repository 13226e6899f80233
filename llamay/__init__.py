"""llamay: a local-first inference runtime for GGUF language models.

`load` and `load_tokenizer` are the top of the package: they take a MODEL as users write it (a
.gguf path or a name in the store, such as `gemma3:270m`), resolve it through the store, and
hand the file to the engine or the tokenizer, which know only paths.
"""

from __future__ import annotations

import os
from typing import Any

from llamay import gguf
from llamay._version import __version__
from llamay.chat import Model
from llamay.errors import (
    ContextOverflow,
    GrammarError,
    InfillUnsupported,
    InvalidRequest,
    KVCacheFull,
    LlamayError,
    ModelFormatError,
    ModelNotFound,
    SnapshotCorrupt,
    SnapshotMismatch,
    TokenizerError,
    UnsupportedCPU,
    UnsupportedModel,
    UnsupportedQuantization,
)
from llamay.store import resolve_model
from llamay.tokenizer import Tokenizer, read_tokenizer

__all__ = [
    "ContextOverflow",
    "GrammarError",
    "InfillUnsupported",
    "InvalidRequest",
    "KVCacheFull",
    "LlamayError",
    "Model",
    "ModelFormatError",
    "ModelNotFound",
    "SnapshotCorrupt",
    "SnapshotMismatch",
    "TokenizerError",
    "UnsupportedCPU",
    "UnsupportedModel",
    "UnsupportedQuantization",
    "__version__",
    "gguf",
    "load",
    "load_tokenizer",
]


def load(
    model: str | os.PathLike[str],
    threads: int | None = None,
    n_ctx: int | None = None,
    kv_memory: int | str | None = None,
    **options: Any,
) -> Model:
    """Load MODEL (a .gguf path or a store name such as `gemma3:270m`) for inference: a
    Model that tokenizes, makes contexts, generates and chats (`Model.chat`).

    threads: threads per forward step (default: every core this process may use).
    n_ctx: the most tokens one context holds (default: min(4096, the training context)).
    kv_memory: the KV cache budget, in bytes or as a size ("2GiB"); default: room for four full
    contexts. Further options, as Model takes them: kv_type "F16" (llama.cpp's default; an
    encoder's default is "F32", as llama.cpp keeps its keys and values), "F32" or "q8_0" (ggml's
    Q8_0 blocks: 17/32 of F16's bytes; head sizes a multiple of 32); page_tokens, the KV page
    size (16, 32 or 64); n_batch, the most tokens one forward
    step takes; backend, "cpu" (the default) or "reference" (NumPy float64, slow: the spec the
    CPU backend is tested against); kernels, "best" or a CPU kernel set ("reference", "avx2",
    "avx512", "neon"; default: $LLAMAY_KERNELS, else the best this CPU runs), every set giving
    the same logits (llamay.UnsupportedCPU names what the CPU lacks for one it cannot run);
    prefix_cache (default True): keep full KV pages
    in the prefix tree and reuse them for new contexts that start with the same tokens (False
    for benchmarks that time the same prompt again and again); lookup, generate()'s default
    prompt-lookup draft length (0, off: see llamay.engine.generate); draft, a draft model (a path,
    a store name or a loaded Model) of the same vocabulary that generate() speculates with by
    default (llamay.engine.draft): the same tokens, in fewer steps.
    """
    draft = options.get("draft")
    if isinstance(draft, (str, os.PathLike)):
        options["draft"] = resolve_model(draft)
    return Model(resolve_model(model), threads=threads, n_ctx=n_ctx, kv_memory=kv_memory, **options)


def load_tokenizer(model: str | os.PathLike[str] | gguf.GGUFFile) -> Tokenizer:
    """The tokenizer of MODEL: a .gguf path (full model or vocabulary only), a store name such as
    `gemma3:270m`, or an already read GGUF file."""
    return read_tokenizer(model if isinstance(model, gguf.GGUFFile) else resolve_model(model))
