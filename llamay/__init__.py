"""llamay: a local-first inference runtime for GGUF language models."""

from __future__ import annotations

from llamay import gguf
from llamay._version import __version__
from llamay.errors import (
    ContextOverflow,
    GrammarError,
    LlamayError,
    ModelFormatError,
    ModelNotFound,
    SnapshotCorrupt,
    SnapshotMismatch,
    TokenizerError,
    UnsupportedCPU,
    UnsupportedModel,
)

__all__ = [
    "ContextOverflow",
    "GrammarError",
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
]
