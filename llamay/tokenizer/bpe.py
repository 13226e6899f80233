"""Byte-pair encoding (`tokenizer.ggml.model = gpt2` or `gemma4`), as llama.cpp's llm_tokenizer_bpe.

Each raw piece of text is cut into words by the vocabulary's pre-tokenizer; each word is written
in GPT-2's byte alphabet (or left as UTF-8 for SentencePiece-style vocabularies, whose spaces
become U+2581) and merged by merge rank. A symbol that no token covers falls back to its single
bytes' tokens, and bytes without one are dropped, as llama.cpp drops them.
"""

from __future__ import annotations

import itertools

import numpy as np

from llamay._core.tokenize import StringTable, bpe_encode
from llamay.tokenizer import unicode as uc
from llamay.tokenizer.pretokenizers import PreTokenizer
from llamay.tokenizer.vocab import Vocab

# str.translate table from Latin-1 characters (one per byte) to GPT-2's byte alphabet.
_BYTE_ALPHABET = {b: ch for b, ch in enumerate(uc.BYTE_TO_CHAR)}


class BpeEncoder:
    def __init__(self, vocab: Vocab, tokens: StringTable) -> None:
        assert vocab.pre is not None
        self._tokens = tokens
        self._pre = PreTokenizer(vocab.pre.kind)
        self._escape_spaces = vocab.pre.escape_whitespaces
        self._ignore_merges = vocab.pre.ignore_merges
        self._spaced_words = vocab.pre.kind == "mmbert"
        self._whole_newlines = vocab.pre.kind in ("gemma4", "mmbert")
        # b"left right" -> rank; of two equal merges the first counts, as in llama.cpp.
        self._merges = StringTable(vocab.merges.blob, vocab.merges.offsets)
        self._byte_tokens = _byte_tokens(vocab, self._pre.byte_level)

    def encode(self, pieces: list[int | str]) -> list[int]:
        """Token ids of raw pieces (str) and special tokens (int) from the special-token cut."""
        out: list[int] = []
        for piece in pieces:
            if isinstance(piece, int):
                out.append(piece)
                continue
            if self._escape_spaces:
                piece = piece.replace(" ", uc.SPACE)
            words = self._pre.split(piece)
            if self._spaced_words:
                words = [w for word in words for w in _spaced(word)]
            out += bpe_encode(
                [self._alphabet(w) for w in words],
                self._tokens,
                self._merges,
                self._byte_tokens,
                self._ignore_merges,
                self._whole_newlines,
            )
        return out

    def _alphabet(self, word: str) -> bytes:
        """A word's UTF-8 bytes, written in the vocabulary's alphabet."""
        raw = word.encode("utf-8", "surrogatepass")
        if not self._pre.byte_level:
            return raw
        return raw.decode("latin-1").translate(_BYTE_ALPHABET).encode("utf-8")


def _spaced(word: str) -> list[str]:
    """mmBERT: a word (not all newlines) gets a leading U+2581 and is cut before each U+2581."""
    if not word.strip("\n"):
        return [word]
    if not word.startswith(uc.SPACE):
        word = uc.SPACE + word
    cuts = [i for i, ch in enumerate(word) if ch == uc.SPACE] + [len(word)]
    return [word[a:b] for a, b in itertools.pairwise(cuts)]


def _byte_tokens(vocab: Vocab, byte_level: bool) -> np.ndarray:
    """What each byte of an unknown symbol becomes, or -1 (dropped).

    Byte-level vocabularies look the raw byte up as a one-byte token (only ASCII can be one);
    UTF-8 vocabularies use <0xXX> byte tokens.
    """
    table = np.full(256, -1, dtype=np.int32)
    for b in range(256):
        if byte_level:
            found = vocab.token_id(chr(b)) if b < 0x80 else None
        else:
            found = vocab.token_id(f"<0x{b:02X}>")
        if found is not None:
            table[b] = found
    return table
