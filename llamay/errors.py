"""The exceptions llamay raises. Each message says what went wrong and, where it can, what to do."""

from __future__ import annotations


class LlamayError(Exception):
    """Base class of every error llamay raises on purpose."""


class ModelFormatError(LlamayError):
    """A file is not a valid GGUF file (or is damaged)."""


class UnsupportedModel(LlamayError):
    """A valid model that llamay declines: an architecture or weight type it does not run."""


class InfillUnsupported(UnsupportedModel):
    """A model asked to fill in the middle (code completion between a prefix and a suffix)
    whose vocabulary has no fill-in-the-middle tokens."""


class UnsupportedQuantization(LlamayError):
    """A quantization llamay does not write (an i-quant, a ternary type), or cannot write for
    this file (a shape no type fits, an importance matrix that is missing or does not fit)."""


class UnsupportedCPU(LlamayError):
    """A kernel set asked for (`kernels=`, LLAMAY_KERNELS) that this build lacks, or that needs
    an instruction this CPU does not have."""


class ModelNotFound(LlamayError):
    """A MODEL argument names neither a file nor a model in the local store."""


class TokenizerError(LlamayError):
    """A vocabulary, pre-tokenizer or chat template that cannot be used."""


class SnapshotMismatch(LlamayError):
    """A snapshot was taken with other weights (or another kernel set) than the loaded model."""


class SnapshotCorrupt(LlamayError):
    """A snapshot file is truncated, tampered with, or of a newer format."""


class GrammarError(LlamayError):
    """A GBNF grammar or JSON schema that cannot be used for constrained sampling."""


class InvalidRequest(LlamayError):
    """A chat request that cannot be answered as given (no messages, a tool choice naming no
    offered tool, a content part that is not text); `param` names the field at fault."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ContextOverflow(LlamayError):
    """More tokens than the context can hold."""


class KVCacheFull(ContextOverflow):
    """No KV page left for the tokens, even after evicting cached ones: the model's KV cache is
    held by other contexts (retry once some are done), not a prompt too long for a context."""


class PullError(LlamayError):
    """A model could not be pulled into the store (not found, refused, interrupted, no space)."""


class DigestMismatch(PullError):
    """Downloaded or imported bytes whose sha256 is not the one they were announced with."""
