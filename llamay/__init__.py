"""llamay: a local-first inference runtime for GGUF language models."""

from __future__ import annotations

from llamay import gguf
from llamay._version import __version__
from llamay.engine import load
from llamay.errors import (
    ContextOverflow,
    GrammarError,
    KVCacheFull,
    LlamayError,
    ModelFormatError,
    ModelNotFound,
    SnapshotCorrupt,
    SnapshotMismatch,
    TokenizerError,
    UnsupportedCPU,
    UnsupportedModel,
)
from llamay.tokenizer import load_tokenizer

__all__ = [
    "ContextOverflow",
    "GrammarError",
    "KVCacheFull",
    "LlamayError",
    "ModelFormatError",
    "ModelNotFound",
    "SnapshotCorrupt",
    "SnapshotMismatch",
    "TokenizerError",
    "UnsupportedCPU",
    "UnsupportedModel",
    "__version__",
    "gguf",
    "load",
    "load_tokenizer",
]
