"""A context: the tokens fed so far and the KV pages that hold their keys and values.

A context is its token list plus its page list (the page table, in position order); the pages
and their refcounts live in the model's pool. Page i holds positions i*P .. i*P+P-1. A fork
copies the page list and takes a reference on each page, so forks share pages until one
writes: a forward step writes K/V at positions n_tokens and after, so the one page there that
may be shared (a partial last page) is copied first (Model._reserve), and full pages are
never written again. A snapshot is exactly this pair plus the last logits (state/snapshot.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
        self.note: dict[str, Any] | None = None  # what a snapshot carried besides the KV
        # Whether this context's full pages may go into the prefix tree, for other contexts to
        # reuse. False for a context restored from a snapshot without verifying it (untrusted
        # KV: its pages could say anything), and so for its forks and for everything computed
        # after those pages, since later KV depends on earlier KV. For the context's life.
        self.shares_prefix = True
        model._context_opened()

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

    def fork(self) -> Context:
        """A new context with the same tokens, logits and KV, sharing every page (no page is
        allocated: the first write into a shared page copies it)."""
        self._check_open()
        child = Context(self.model)
        with self.model._lock:
            for page in self._page_table():
                self.model.pool.arena.incref(int(page))
            child._add_pages(self._page_table())
        child._tokens = list(self._tokens)
        child._logits = self._logits
        child.shares_prefix = self.shares_prefix
        return child

    def rewind(self, n_tokens: int) -> None:
        """Keeps the first n_tokens tokens and forgets the rest, dropping the pages past them.

        The logits become those after token n_tokens-1, recomputed by one decode step that
        writes the same K/V again (prefill and decode write identical KV); the stale slots of
        a kept partial page are never read and are overwritten by the next write. Raises
        ContextOverflow, changing nothing, when that step finds no page for a copy.
        """
        self._check_open()
        if not 0 <= n_tokens <= self.n_tokens:
            raise ValueError(f"cannot rewind to {n_tokens} tokens: the context has {self.n_tokens}")
        if n_tokens == self.n_tokens:
            return
        if n_tokens == 0:
            self._truncate(0)
            return
        with self.model._lock:
            # Room for the decode step first, so that a full cache changes nothing.
            self.model._make_room(self._rewind_pages_needed(n_tokens))
            last = self._tokens[n_tokens - 1]
            self._truncate(n_tokens - 1)
            self.feed([last])

    def save(self, path: str | os.PathLike[str], note: dict[str, Any] | None = None) -> None:
        """Writes a snapshot (tokens, KV pages, logits, checksums) that model.restore reads;
        `note`, a JSON object kept with it, comes back as the restored context's `note`."""
        from llamay.state.snapshot import save

        self._check_open()
        save(self, path, note)

    def close(self) -> None:
        """Returns the pages to the pool. The context is empty and unusable after."""
        if self._closed:
            return
        self._closed = True
        pages, self._n_pages = self._pages[: self._n_pages].copy(), 0
        self._tokens = []
        self._logits = None
        self.model._release(pages)
        self.model._context_closed()

    # ---- for Model.forward_batch, restore and the prefix tree ----

    def _check_open(self) -> None:
        if self._closed:
            raise LlamayError("this context is closed")

    def _truncate(self, n_tokens: int) -> None:
        keep = math.ceil(n_tokens / self.model.page_tokens)
        dropped = self._pages[keep : self._n_pages].copy()
        self._n_pages = keep
        del self._tokens[n_tokens:]
        self._logits = None
        self.model._release(dropped)

    def _rewind_pages_needed(self, n_tokens: int) -> int:
        """Free pages the decode step of rewind(n_tokens) needs beyond those its truncation
        to n_tokens-1 frees: one when position n_tokens-1 starts a new page or lies in a
        shared one (copied)."""
        arena, p = self.model.pool.arena, self.model.page_tokens
        index = (n_tokens - 1) // p
        needs = (n_tokens - 1) % p == 0 or arena.refcount(int(self._pages[index])) > 1
        dropped = self._pages[math.ceil((n_tokens - 1) / p) : self._n_pages]
        freed = sum(arena.refcount(int(page)) == 1 for page in dropped)
        return max(0, int(needs) - freed)

    def _pages_needed(self, n_new: int) -> int:
        """Pages to add so that n_new more tokens have somewhere to go."""
        return math.ceil((self.n_tokens + n_new) / self.model.page_tokens) - self._n_pages

    def _shared_tail(self) -> int | None:
        """The index of the partial last page when another holder shares it: the next write
        lands there, so it must be copied first."""
        if self.n_tokens % self.model.page_tokens == 0:
            return None
        index = self._n_pages - 1
        return index if self.model.pool.arena.refcount(int(self._pages[index])) > 1 else None

    def _replace_page(self, index: int, page: int) -> None:
        self._pages[index] = page

    def _add_pages(self, pages: np.ndarray) -> None:
        self._pages[self._n_pages : self._n_pages + len(pages)] = pages
        self._n_pages += len(pages)

    def _page_table(self) -> np.ndarray:
        return self._pages[: self._n_pages]

    def _append(self, ids: list[int], last_logits: np.ndarray | None) -> None:
        self._tokens.extend(ids)
        self._logits = last_logits
