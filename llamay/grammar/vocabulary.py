"""The token trie of a tokenizer, built once and shared by every matcher over it.

A token is in the trie when it stands for text: its piece (llama.cpp's token_to_piece) is not
empty and it is neither a control token nor an end-of-generation token. EOG tokens are handled
by the matcher; other control tokens are never allowed under a grammar.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from llamay._core.grammar import TokenTrie
from llamay.tokenizer import Tokenizer

_tries: weakref.WeakKeyDictionary[Tokenizer, TokenTrie] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def token_trie(tokenizer: Tokenizer) -> TokenTrie:
    with _lock:
        trie = _tries.get(tokenizer)
        if trie is None:
            trie = _tries[tokenizer] = _build(tokenizer)
        return trie


def _build(tokenizer: Tokenizer) -> TokenTrie:
    pieces, ids = [], []
    eog = tokenizer.eog_ids
    for token in range(tokenizer.n_vocab):
        if token in eog or tokenizer.is_control(token):
            continue
        piece = tokenizer.token_to_piece(token)
        if piece:
            pieces.append(piece)
            ids.append(token)
    return TokenTrie(pieces, np.array(ids, dtype=np.int32), tokenizer.n_vocab)
