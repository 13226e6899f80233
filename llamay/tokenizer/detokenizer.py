"""From token ids back to text: each token's bytes (llama.cpp's token_to_piece), whole sequences,
and a streaming decoder that only ever emits complete characters.
"""

from __future__ import annotations

import codecs
import re

from llamay.tokenizer import unicode as uc
from llamay.tokenizer.vocab import Attr, Vocab

_RENDERED_AS_TEXT = Attr.UNKNOWN | Attr.CONTROL | Attr.USER_DEFINED
_HIDDEN_UNLESS_SPECIAL = Attr.UNKNOWN | Attr.CONTROL
_HEX_PREFIX = re.compile(r"[0-9a-fA-F]*")


class Pieces:
    """The bytes each token stands for."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab
        self._unescape = vocab.escape_whitespaces
        self._cache: list[bytes | None] = [None] * len(vocab.tokens)

    def piece(self, token: int, special: bool = False) -> bytes:
        """Control and unknown tokens are empty unless `special`; byte tokens are their byte."""
        attr = self._vocab.attrs[token]
        if not special and attr & _HIDDEN_UNLESS_SPECIAL:
            return b""
        cached = self._cache[token]
        if cached is None:
            cached = self._cache[token] = self._render(token, attr)
        return cached

    def _render(self, token: int, attr: int) -> bytes:
        text = self._vocab.tokens[token]
        if attr & _RENDERED_AS_TEXT:
            return text.encode("utf-8", "surrogatepass")
        if attr & Attr.NORMAL:
            if self._unescape:
                return text.replace(uc.SPACE, " ").encode("utf-8", "surrogatepass")
            return _from_byte_alphabet(text)
        if attr & Attr.BYTE:
            # As llama.cpp: the two characters after "<0x", read as far as they are hex.
            return bytes([int(_HEX_PREFIX.match(text[3:5]).group() or "0", 16)])
        return b""


def _from_byte_alphabet(text: str) -> bytes:
    """A byte-level BPE token's bytes; a character outside the alphabet is shown as llama.cpp
    shows it (it cannot be a byte)."""
    out = bytearray()
    for ch in text:
        byte = uc.CHAR_TO_BYTE.get(ch)
        if byte is not None:
            out.append(byte)
        else:
            hex_utf8 = ch.encode("utf-8", "surrogatepass").hex()
            out += f"[UNK_BYTE_0x{hex_utf8}{text}]".encode("utf-8", "surrogatepass")
    return bytes(out)


# clean_up_tokenization_spaces, as llama.cpp's detokenize applies it (three passes, in order).
_SPACE_BEFORE_PUNCT = re.compile(rb" (?=[?!.,])")
_QUOTE_BETWEEN_SPACES = re.compile(rb" ' ")
_SPACE_BEFORE_CONTRACTION = re.compile(rb" (?='[sm]|'re|'ve)")


def _clean_spaces(text: bytes) -> bytes:
    text = _SPACE_BEFORE_PUNCT.sub(b"", text)
    text = _QUOTE_BETWEEN_SPACES.sub(b"'", text)
    return _SPACE_BEFORE_CONTRACTION.sub(b"", text)


def detokenize(vocab: Vocab, pieces: Pieces, ids: list[int], special: bool) -> str:
    """The text of `ids`: the inverse of tokenizing wherever the vocabulary allows it.

    As llama.cpp's llama_detokenize, except that the space a SentencePiece vocabulary prefixes to
    the text is removed from the first text token even after a BOS (llama.cpp keeps it there),
    so that text -> tokens -> text comes back unchanged with the BOS too.
    """
    out = bytearray()
    strip_space = vocab.add_space_prefix
    for position, token in enumerate(ids):
        piece = pieces.piece(token, special)
        if strip_space and piece.startswith(b" "):
            piece = piece[1:]
        if not (position == 0 and token == vocab.ids["bos"]):
            strip_space = False
        out += piece
    text = bytes(out)
    if vocab.clean_spaces:
        text = _clean_spaces(text)
    return text.decode("utf-8", "replace")


class StreamDecoder:
    """Turns tokens, one at a time, into text; a character split across byte tokens is held back
    until it is complete, and bytes that can never complete one come out as U+FFFD.

    Pieces come out as they are: no space is stripped and no spacing is tidied, as for text that
    continues a prompt.
    """

    def __init__(self, pieces: Pieces, special: bool = False) -> None:
        self._pieces = pieces
        self._special = special
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, token: int) -> str:
        """The text that `token` completes (possibly empty)."""
        return self._utf8.decode(self._pieces.piece(token, self._special))

    def flush(self) -> str:
        """Whatever is held back, with an incomplete character as U+FFFD."""
        return self._utf8.decode(b"", final=True)
