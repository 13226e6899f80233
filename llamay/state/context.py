"""A context: the tokens fed so far and the KV pages that hold their keys and values.

A context is its token list plus its page list (in position order); the pages, their refcounts
and the prefix tree live in the model's KV cache (kv_cache.py). A fork copies the page list and
takes a reference on each page, so forks share pages until one writes: a forward step writes K/V
at positions n_tokens and after, so the one page there that may be shared (a partial last page)
is copied first (KVCache.reserve), and full pages are never written again. A snapshot is exactly
this pair plus the last logits (snapshot.py).

The model a context belongs to is its `Runner`: the engine's Model, which evaluates tokens
(`forward_batch`) and calls `record` when a step has appended them.

A context restored from a snapshot holds KV that came from outside: it is not `trusted`, and
neither is anything computed after it (later KV depends on earlier KV) nor any fork of it. Such a
context never adds pages to the prefix tree, which every context of the model shares.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from llamay.errors import LlamayError, SnapshotCorrupt
from llamay.paths import remove_stale_partials
from llamay.state import snapshot
from llamay.state.kv_cache import KVCache, PageList
from llamay.state.layout import ModelIdentity


class Runner(Protocol):
    """What a context needs of its model."""

    kv_cache: KVCache
    n_ctx: int
    n_vocab: int

    @property
    def identity(self) -> ModelIdentity: ...

    def forward_batch(
        self, items: Sequence[tuple[Context, Sequence[int]]], want_logits: str = "last"
    ) -> list[np.ndarray] | None: ...


class Context:
    """Tokens fed to a model and their KV state. Make one with `model.context()`."""

    def __init__(self, model: Runner, *, trusted: bool = True) -> None:
        self.model = model
        self.trusted = trusted
        self.note: dict[str, Any] | None = None  # what a snapshot carried besides the KV
        self._cache = model.kv_cache
        self._tokens: list[int] = []
        self._pages = PageList(math.ceil(model.n_ctx / self._cache.page_tokens))
        self._logits: np.ndarray | None = None
        self._closed = False
        with self._cache.lock:
            self._cache.n_contexts += 1

    def __repr__(self) -> str:
        return f"<llamay.Context {self.n_tokens} tokens, {len(self._pages)} pages>"

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
        return self._pages.ids.tolist()

    @property
    def page_list(self) -> PageList:
        """The page list itself, for the KV cache's verbs and the forward step."""
        return self._pages

    def page_sharing(self) -> dict[str, int]:
        """The pages this context holds: in all, those another context holds too (a fork, or
        one it was forked from: no memory of their own), and its own (freed when it closes)."""
        self.check_open()
        shared = self._cache.shared(self._pages)
        return {"total": len(self._pages), "shared": shared, "own": len(self._pages) - shared}

    @property
    def closed(self) -> bool:
        return self._closed

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

    def logits(self, copy: bool = True) -> np.ndarray:
        """The logits after the last fed token: a float32 (n_vocab,) copy, or with copy=False a
        read-only view (for a reader that copies only what it changes: the sampler)."""
        self.check_open()
        if self._logits is None:
            raise LlamayError("this context has no logits yet: feed it tokens first")
        if copy:
            return self._logits.copy()
        view = self._logits.view()
        view.flags.writeable = False
        return view

    def fork(self) -> Context:
        """A new context with the same tokens, logits and KV, sharing every page (no page is
        allocated: the first write into a shared page copies it)."""
        self.check_open()
        child = Context(self.model, trusted=self.trusted)
        self._cache.share(self._pages, child._pages)
        child._tokens = list(self._tokens)
        child._logits = self._logits
        child.note = self.note
        return child

    def rewind(self, n_tokens: int) -> None:
        """Keeps the first n_tokens tokens and forgets the rest, dropping the pages past them.

        The logits become those after token n_tokens-1, recomputed by one decode step that
        writes the same K/V again (prefill and decode write identical KV); the stale slots of
        a kept partial page are never read and are overwritten by the next write. Raises
        ContextOverflow, changing nothing, when that step finds no page for a copy.
        """
        self.check_open()
        if not 0 <= n_tokens <= self.n_tokens:
            raise ValueError(f"cannot rewind to {n_tokens} tokens: the context has {self.n_tokens}")
        if n_tokens == self.n_tokens:
            return
        if n_tokens == 0:
            self._truncate(0)
            return
        with self._cache.lock:
            # Room for the decode step first, so that a full cache changes nothing.
            self._cache.make_room(self._cache.pages_to_rewind(self._pages, n_tokens))
            last = self._tokens[n_tokens - 1]
            self._truncate(n_tokens - 1)
            self.feed([last])

    def truncate(self, n_tokens: int) -> None:
        """Keeps the first n_tokens tokens and forgets the rest, dropping the pages past them,
        without recomputing anything: the logits are unknown until the next feed (a draft
        model's context, cut back to the tokens its target kept)."""
        self.check_open()
        if not 0 <= n_tokens <= self.n_tokens:
            raise ValueError(
                f"cannot truncate to {n_tokens} tokens: the context has {self.n_tokens}"
            )
        if n_tokens < self.n_tokens:
            with self._cache.lock:
                self._truncate(n_tokens)

    def save(self, path: str | os.PathLike[str], note: dict[str, Any] | None = None) -> None:
        """Writes a snapshot (tokens, KV pages, logits, checksums) that model.restore reads;
        `note`, a JSON object kept with it, comes back as the restored context's `note`.
        Temporary files that killed saves to `path` left beside it go first."""
        self.check_open()
        remove_stale_partials(Path(path))
        with self._cache.lock:
            pages = [self._cache.storage.read(int(page)) for page in self._pages.ids]
            snapshot.write(
                path,
                self.model.identity,
                self._cache.layout,
                self._tokens,
                self._logits,
                pages,
                note,
            )

    @classmethod
    def restore(
        cls, model: Runner, path: str | os.PathLike[str], *, verify: bool = False
    ) -> Context:
        """The context saved at path (snapshot.read says what is refused), allocating nothing
        when it is refused.

        Its KV came from outside, so the context is not trusted (the module docstring) unless
        `verify`: then the tokens are computed again and the snapshot is refused
        (SnapshotCorrupt) unless every page and the logits are the same bits; the context
        returned is the recomputed one, trusted, with the snapshot's note.
        """
        saved = snapshot.read(path, model.identity, model.kv_cache.layout, model.n_ctx)
        cache = model.kv_cache
        ctx = cls(model, trusted=False)
        ctx.note = saved.note
        try:
            with cache.lock:
                cache.make_room(saved.n_pages)  # or ContextOverflow, nothing allocated
                pages = cache.take(saved.n_pages)
                ctx._pages.extend(pages)
                size = cache.layout.page_bytes
                for i, page in enumerate(pages.tolist()):
                    cache.storage.write(page, saved.pages[i * size : (i + 1) * size])
            ctx._tokens = list(saved.tokens)
            ctx._logits = saved.logits
            if verify:
                return ctx._verified(path)
        except BaseException:
            ctx.close()
            raise
        return ctx

    def _verified(self, path: str | os.PathLike[str]) -> Context:
        """A trusted context computed from this one's tokens, if it holds what they compute."""
        computed = Context(self.model)
        try:
            if self._tokens:
                computed.feed(self._tokens)
            # positions past the last token may hold stale KV (a rewind keeps its partial page)
            storage, layout, p = self._cache.storage, self._cache.layout, self._cache.page_tokens
            differ = next(
                (
                    f"page {i}"
                    for i, (a, b) in enumerate(
                        zip(self._pages.ids, computed._pages.ids, strict=True)
                    )
                    if not np.array_equal(
                        layout.positions(storage.read(int(a)), min(p, self.n_tokens - i * p)),
                        layout.positions(storage.read(int(b)), min(p, self.n_tokens - i * p)),
                    )
                ),
                None,
            )
            ours, theirs = self._logits, computed._logits
            if differ is None and ours is not None and theirs is not None:
                differ = None if ours.tobytes() == theirs.tobytes() else "the logits"
            if differ is not None:
                raise SnapshotCorrupt(
                    f"{path}: {differ}: not what these weights compute from the snapshot's "
                    "tokens: it was altered, or written by another kernel build"
                )
        except BaseException:
            computed.close()
            raise
        computed.note = self.note
        if self._logits is None:
            computed._logits = None
        self.close()
        return computed

    def close(self) -> None:
        """Returns the pages to the cache. The context is empty and unusable after."""
        if self._closed:
            return
        self._closed = True
        self._tokens = []
        self._logits = None
        with self._cache.lock:
            self._cache.release(self._pages.cut(0))
            self._cache.n_contexts -= 1

    # ---- for the runner ----

    def check_open(self) -> None:
        if self._closed:
            raise LlamayError("this context is closed")

    def record(self, ids: Sequence[int], last_logits: np.ndarray | None) -> None:
        """Appends tokens that a forward step has written into this context's pages, and the
        logits after the last of them (None: none computed); a trusted context caches its new
        full pages in the prefix tree."""
        full_before = len(self._tokens) // self._cache.page_tokens
        self._tokens.extend(int(t) for t in ids)
        self._logits = last_logits
        if self.trusted and len(self._tokens) // self._cache.page_tokens > full_before:
            self._cache.commit(self._tokens, self._pages)

    def keep(self, n_tokens: int, last_logits: np.ndarray) -> None:
        """Keeps the first n_tokens tokens, whose last logits the caller computed in the step
        that fed them (speculative decoding keeps the draft tokens that were accepted); the
        pages past them go, and stale slots of a kept partial page are overwritten later."""
        if not 0 < n_tokens <= self.n_tokens:
            raise ValueError(f"cannot keep {n_tokens} tokens: the context has {self.n_tokens}")
        with self._cache.lock:
            self._truncate(n_tokens)
            self._logits = last_logits

    def adopt_prefix(self, ids: Sequence[int]) -> int:
        """An empty trusted context takes the cached pages of the longest prefix of ids and
        appends those tokens (their logits are not known); returns how many it took."""
        if self._tokens or not self.trusted:
            return 0
        with self._cache.lock:
            n_cached = self._cache.adopt_prefix(self._pages, ids)
            self._tokens.extend(int(t) for t in ids[:n_cached])
            return n_cached

    def _truncate(self, n_tokens: int) -> None:
        keep = math.ceil(n_tokens / self._cache.page_tokens)
        del self._tokens[n_tokens:]
        self._logits = None
        self._cache.release(self._pages.cut(keep))
