"""A context: the tokens fed so far and the KV pages that hold their keys and values.

A context is its token list plus its page list (the page table, in position order); the pages
and their refcounts live in the model's pool. Page i holds positions i*P .. i*P+P-1. Forking,
copy-on-write and snapshots build on exactly this pair: a forward step writes K/V at positions
n_tokens and after, so a page there that another context shares must be copied before the
step (Model._reserve is where pages are made ready for writing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from llamay.errors import LlamayError

if TYPE_CHECKING:
    from llamay.engine.model import Model


class Context:
    """Tokens fed to a model and their KV state. Make one with `model.context()`."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self._tokens: list[int] = []
        self._pages = np.empty(math.ceil(model.n_ctx / model.page_tokens), dtype=np.int32)
        self._n_pages = 0
        self._logits: np.ndarray | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<llamay.Context {self.n_tokens} tokens, {self._n_pages} pages>"

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    @property
    def tokens(self) -> list[int]:
        return list(self._tokens)

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def pages(self) -> list[int]:
        """The ids of the pages holding this context's KV, in position order."""
        return self._pages[: self._n_pages].tolist()

    def feed(self, ids: Sequence[int], all_logits: bool = False) -> np.ndarray | None:
        """Evaluate ids after the tokens already fed and append them.

        With all_logits, returns the logits after every one of them, (len(ids), n_vocab)
        float32 (feed a long text in pieces to bound that memory); otherwise returns None and
        logits() gives the logits after the last one. Raises ContextOverflow past n_ctx.
        """
        if len(ids) == 0:
            return np.empty((0, self.model.n_vocab), dtype=np.float32) if all_logits else None
        result = self.model.forward_batch([(self, ids)], "all" if all_logits else "last")
        return result[0] if all_logits else None

    def logits(self) -> np.ndarray:
        """The logits after the last fed token: a float32 (n_vocab,) copy."""
        self._check_open()
        if self._logits is None:
            raise LlamayError("this context has no logits yet: feed it tokens first")
        return self._logits.copy()

    def close(self) -> None:
        """Returns the pages to the pool. The context is empty and unusable after."""
        if self._closed:
            return
        self._closed = True
        pages, self._n_pages = self._pages[: self._n_pages].copy(), 0
        self._tokens = []
        self._logits = None
        self.model._release(pages)

    # ---- for Model.forward_batch ----

    def _check_open(self) -> None:
        if self._closed:
            raise LlamayError("this context is closed")

    def _pages_needed(self, n_new: int) -> int:
        """Pages to add so that n_new more tokens have somewhere to go."""
        return math.ceil((self.n_tokens + n_new) / self.model.page_tokens) - self._n_pages

    def _add_pages(self, pages: np.ndarray) -> None:
        self._pages[self._n_pages : self._n_pages + len(pages)] = pages
        self._n_pages += len(pages)

    def _page_table(self) -> np.ndarray:
        return self._pages[: self._n_pages]

    def _append(self, ids: list[int], last_logits: np.ndarray | None) -> None:
        self._tokens.extend(ids)
        self._logits = last_logits
