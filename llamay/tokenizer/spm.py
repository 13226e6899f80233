"""SentencePiece (`tokenizer.ggml.model = llama`): Llama 2, Gemma, Phi-3, Mistral.

As llama.cpp's llm_tokenizer_spm: each raw piece of text gets a leading space when it opens the
text or follows a special token (if the vocabulary adds a space prefix), spaces become U+2581,
and symbols merge by token score; what no token covers falls back to <0xXX> byte tokens.
"""

from __future__ import annotations

import numpy as np

from llamay._core.tokenize import StringTable, spm_encode
from llamay.tokenizer.unicode import SPACE
from llamay.tokenizer.vocab import Vocab


class SpmEncoder:
    def __init__(self, vocab: Vocab, tokens: StringTable) -> None:
        self._tokens = tokens
        self._scores = np.ascontiguousarray(vocab.scores, dtype=np.float64)
        self._byte_tokens = _byte_tokens(vocab)
        self._space_prefix = vocab.add_space_prefix

    def encode(self, pieces: list[int | str]) -> list[int]:
        """Token ids of raw pieces (str) and special tokens (int) from the special-token cut."""
        out: list[int] = []
        after_special = True  # the start counts as following a special token
        for piece in pieces:
            if isinstance(piece, int):
                out.append(piece)
                after_special = True
                continue
            if self._space_prefix and after_special:
                piece = " " + piece
            text = piece.replace(" ", SPACE).encode("utf-8", "surrogatepass")
            out += spm_encode(text, self._tokens, self._scores, self._byte_tokens)
            after_special = False
        return out


def _byte_tokens(vocab: Vocab) -> np.ndarray:
    """The token of each byte: <0xXX>, else the byte itself as a token (only ASCII can be one),
    else -1."""
    table = np.full(256, -1, dtype=np.int32)
    for b in range(256):
        found = vocab.token_id(f"<0x{b:02X}>")
        if found is None and b < 0x80:
            found = vocab.token_id(chr(b))
        if found is not None:
            table[b] = found
    return table
