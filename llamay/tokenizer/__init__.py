"""Tokenizers that agree with llama.cpp: SentencePiece, BPE with every llama.cpp pre-tokenizer, and
WordPiece; special tokens, detokenizing and streaming. Chat templates live in `chat`."""

from __future__ import annotations

import os

from llamay import gguf
from llamay.tokenizer.detokenizer import StreamDecoder
from llamay.tokenizer.tokenizer import Tokenizer
from llamay.tokenizer.vocab import load_vocab

__all__ = ["StreamDecoder", "Tokenizer", "read_tokenizer"]


def read_tokenizer(model: str | os.PathLike[str] | gguf.GGUFFile) -> Tokenizer:
    """The tokenizer of a .gguf file (full model or vocabulary only), by path or already read.
    (`llamay.load_tokenizer` also takes a store name such as `gemma3:270m`.)"""
    gg = model if isinstance(model, gguf.GGUFFile) else gguf.read(model)
    return Tokenizer(load_vocab(gg.metadata, str(gg.path)))
