"""Tokenizers that agree with llama.cpp: SentencePiece, BPE with every llama.cpp pre-tokenizer, and
WordPiece; special tokens, detokenizing and streaming. Chat templates live in `chat`."""

from __future__ import annotations

import os

from llamay import gguf
from llamay.tokenizer.detokenizer import StreamDecoder
from llamay.tokenizer.tokenizer import Tokenizer
from llamay.tokenizer.vocab import load_vocab

__all__ = ["StreamDecoder", "Tokenizer", "load_tokenizer"]


def load_tokenizer(model: str | os.PathLike[str] | gguf.GGUFFile) -> Tokenizer:
    """The tokenizer of MODEL: a .gguf path (full model or vocabulary only), a store name such as
    `gemma3:270m`, or an already read GGUF file."""
    if isinstance(model, gguf.GGUFFile):
        gg = model
    else:
        from llamay.store import resolve_model  # the store sits above; only names need it

        gg = gguf.read(resolve_model(model))
    return Tokenizer(load_vocab(gg.metadata, str(gg.path)))
