"""The KV cache of one model: the page table, the pages, the prefix tree, and the lock.

The only owner of KV bookkeeping. The page table (refcounts and the free list) says which pages
are in use and how many holders each has; the storage (a backend's PageStorage) holds their
bytes; the prefix tree keeps full pages after their contexts are gone; each context holds its
own `PageList`. Every change goes through the verbs here, under `lock`:

- `adopt_prefix`: an empty sequence takes the cached pages of the longest prefix of its tokens;
- `reserve`: every new position of a step gets somewhere to go, for all sequences or (raising
  ContextOverflow) for none: new pages past each sequence's last one, and a private copy of a
  partial last page that another holder shares (copy-on-write);
- `commit`: a sequence's full pages go into the prefix tree;
- `share` (a fork), `release` (a context's pages dropped), `evict`, `stats`.

Invariants, after every verb: pages used + pages free == pages total; a page is free exactly when
its refcount is 0; a free page holds zeros (a page is zeroed when its last holder lets go, so a
page comes out of `reserve` clean and never carries one context's KV into another's snapshot).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from llamay._core.pages import PageTable
from llamay.errors import ContextOverflow, KVCacheFull
from llamay.state.layout import KVLayout, PageStorage
from llamay.state.prefix_tree import PrefixTree


class PageList:
    """A sequence's pages in position order: page i holds positions i*P .. i*P+P-1."""

    def __init__(self, capacity: int) -> None:
        self._ids = np.empty(capacity, dtype=np.int32)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> np.ndarray:
        """The page ids, int32 (a view: valid until the list changes)."""
        return self._ids[: self._n]

    def extend(self, pages: np.ndarray | Sequence[int]) -> None:
        pages = np.asarray(pages, dtype=np.int32)
        if self._n + len(pages) > len(self._ids):
            raise ContextOverflow(
                f"a context holds at most {len(self._ids)} pages; {self._n + len(pages)} asked"
            )
        self._ids[self._n : self._n + len(pages)] = pages
        self._n += len(pages)

    def replace(self, index: int, page: int) -> None:
        self._ids[index] = page

    def cut(self, n_keep: int) -> np.ndarray:
        """Keeps the first n_keep pages; returns the others (a copy)."""
        dropped = self._ids[n_keep : self._n].copy()
        self._n = min(self._n, n_keep)
        return dropped


class KVCache:
    """The pages of one model's contexts; see the module docstring.

    n_pages pages of `layout` in `storage`; prefix_cache: keep full pages in the prefix tree
    and reuse them (False for benchmarks that time the same prompt again and again).
    """

    def __init__(
        self, layout: KVLayout, n_pages: int, storage: PageStorage, *, prefix_cache: bool = True
    ) -> None:
        self.layout = layout
        self.storage = storage
        self.table = PageTable(n_pages)
        self.tree = PrefixTree(self, layout.page_tokens)
        self.prefix_cache = prefix_cache
        # Reentrant: a context garbage-collected while the lock is held releases its pages.
        self.lock = threading.RLock()
        self.n_contexts = 0  # contexts open on these pages

    @property
    def page_tokens(self) -> int:
        return self.layout.page_tokens

    @property
    def n_pages(self) -> int:
        return self.table.n_pages

    # ---- references (the prefix tree takes and drops them too) ----

    def incref(self, page: int) -> int:
        return self.table.incref(page)

    def decref(self, page: int) -> int:
        count = self.table.decref(page)
        if count == 0:
            self.storage.zero(page)
        return count

    def refcount(self, page: int) -> int:
        return self.table.refcount(page)

    def in_use(self, pages: np.ndarray) -> bool:
        """Whether every id of pages is a page in use (a page table a backend may read)."""
        return self.table.all_in_use(np.ascontiguousarray(pages, dtype=np.int32))

    # ---- the verbs ----

    def adopt_prefix(self, pages: PageList, tokens: Sequence[int]) -> int:
        """Gives an empty sequence the cached pages of the longest prefix of tokens (at least
        the last token is left to compute, for its logits); returns how many tokens they hold."""
        if len(pages) or not self.prefix_cache or len(tokens) < 2:
            return 0
        with self.lock:
            matched = self.tree.match([int(t) for t in tokens[:-1]])
            for page in matched:
                self.incref(page)
            pages.extend(matched)
            return len(matched) * self.page_tokens

    def reserve(self, sequences: Sequence[tuple[PageList, int, int]]) -> None:
        """For each (pages, n_tokens, n_new): room for n_new more positions after n_tokens, all
        of it or (ContextOverflow, nothing allocated) none."""
        with self.lock:
            needed = [self.pages_needed(p, n, new) for p, n, new in sequences]
            shared = [self._shared_tail(p, n) for p, n, _ in sequences]
            self.make_room(sum(needed) + sum(index is not None for index in shared))
            for (pages, _, _), n, index in zip(sequences, needed, shared, strict=True):
                if index is not None:
                    old = int(pages.ids[index])
                    copy = int(self.take(1)[0])
                    self.storage.copy(old, copy)
                    self.decref(old)
                    pages.replace(index, copy)
                if n:
                    pages.extend(self.take(n))

    def take(self, n: int) -> np.ndarray:
        """n free pages, now in use (refcount 1), told to the storage (which may prepare
        memory for them); ContextOverflow, nothing taken, when fewer are free."""
        with self.lock:
            pages = self.table.alloc_many(n)
            self.storage.taking(pages)
            return pages

    def commit(self, tokens: Sequence[int], pages: PageList) -> None:
        """Caches the full pages of a sequence (its tokens and pages) in the prefix tree."""
        if self.prefix_cache and len(tokens) >= self.page_tokens:
            with self.lock:
                self.tree.insert(tokens, pages.ids)

    def share(self, source: PageList, into: PageList) -> None:
        """A fork: `into` (empty) takes a reference on every page of source."""
        with self.lock:
            for page in source.ids:
                self.incref(int(page))
            into.extend(source.ids)

    def release(self, pages: np.ndarray) -> None:
        """Drops one reference on each page (a context's, or what it cut off)."""
        with self.lock:
            for page in pages:
                self.decref(int(page))

    def make_room(self, n_pages: int) -> None:
        """Evicts cached pages until n_pages are free; KVCacheFull (a ContextOverflow: the
        server answers 503, to be retried), nothing allocated, when even that is not enough."""
        with self.lock:
            if n_pages > self.table.n_free:
                self.tree.evict(n_pages - self.table.n_free)
            if n_pages > self.table.n_free:
                mib = self.n_pages * self.layout.page_bytes / 1048576.0
                raise KVCacheFull(
                    f"the KV cache is full: {n_pages} page(s) of {self.page_tokens} tokens "
                    f"needed but only {self.table.n_free} of {self.n_pages} are free "
                    f"({mib:.1f} MiB in all); free a context or raise the KV memory budget"
                )

    def evict(self, n_pages: int) -> int:
        """Frees up to n_pages cached pages that no context holds; returns how many."""
        with self.lock:
            return self.tree.evict(n_pages)

    def clear_prefix_cache(self) -> None:
        """Drops every page the prefix tree holds (those no context holds are freed)."""
        with self.lock:
            self.tree.clear()

    # ---- questions ----

    def pages_needed(self, pages: PageList, n_tokens: int, n_new: int) -> int:
        """Pages to add so that n_new more tokens after n_tokens have somewhere to go."""
        return math.ceil((n_tokens + n_new) / self.page_tokens) - len(pages)

    def pages_to_rewind(self, pages: PageList, n_tokens: int) -> int:
        """Free pages a sequence cut back to n_tokens - 1 tokens needs to feed its token
        n_tokens - 1 again (Context.rewind), beyond those the cut frees: one when that position
        starts a new page or lies in a shared page (copied first)."""
        p = self.page_tokens
        index = (n_tokens - 1) // p
        needs = (n_tokens - 1) % p == 0 or self.refcount(int(pages.ids[index])) > 1
        dropped = pages.ids[math.ceil((n_tokens - 1) / p) :]
        freed = sum(self.refcount(int(page)) == 1 for page in dropped)
        return max(0, int(needs) - freed)

    def shared(self, pages: PageList) -> int:
        """How many of a sequence's pages another sequence holds too (the prefix tree's
        reference on a page does not count: the tree shares what it caches, it uses nothing)."""
        with self.lock:
            ids = pages.ids
            holders = self.table.refcounts(ids) - np.isin(ids, self.tree.pages())
            return int(np.count_nonzero(holders > 1))

    def stats(self) -> dict[str, Any]:
        """Page accounting: page_tokens, pages_total, pages_used, pages_free, bytes_per_page,
        dtype; pages_cached (pages the prefix tree holds, some of them also held by contexts),
        prefix_hits and prefix_misses (lookups by empty contexts that found a cached prefix, or
        none)."""
        with self.lock:
            return {
                "page_tokens": self.page_tokens,
                "pages_total": self.n_pages,
                "pages_used": self.table.n_used,
                "pages_free": self.table.n_free,
                "bytes_per_page": self.layout.page_bytes,
                "dtype": self.layout.dtype,
                "pages_cached": self.tree.n_pages,
                "prefix_hits": self.tree.hits,
                "prefix_misses": self.tree.misses,
            }

    def _shared_tail(self, pages: PageList, n_tokens: int) -> int | None:
        """The index of a sequence's partial last page when another holder shares it: the next
        write lands there, so it must be copied first."""
        if n_tokens % self.page_tokens == 0:
            return None
        index = len(pages) - 1
        return index if self.refcount(int(pages.ids[index])) > 1 else None
