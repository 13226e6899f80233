"""A loaded model: its file, tokenizer and chat template, its KV pages, and the forward step.

`load()` maps the file (weights stay where they lie; the matrices whose kernels read a packed
layout are packed once into huge pages), reads the hyperparameters through the family zoo and
binds the C engine. Contexts (context.py) hold the state; `forward_batch` runs one forward pass
over several of them, cut into steps of at most `n_batch` tokens, taking cached prefixes from
the prefix tree (state/prefix_tree.py) and copying shared pages before it writes them.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from llamay import gguf
from llamay._core.engine import Engine
from llamay.engine.context import Context
from llamay.engine.generate import Generation, generate
from llamay.engine.scheduler import Scheduler
from llamay.errors import ContextOverflow, KVCacheFull, LlamayError
from llamay.models.hparams import HParams, from_metadata
from llamay.models.registry import check_supported
from llamay.models.spec import model_spec
from llamay.state import PagePool, parse_size
from llamay.state.fingerprint import file_fingerprint
from llamay.state.prefix_tree import PrefixTree
from llamay.tokenizer import Tokenizer, load_tokenizer
from llamay.tokenizer.chat import ChatTemplate

DEFAULT_N_CTX = 4096  # llama.cpp's default context, capped by what the model was trained for
# Tokens per forward step: prefill is as fast in steps of 128 as of 512 (within 3%), and the
# scratch buffers, sized for a step, take a quarter of the memory.
DEFAULT_N_BATCH = 128
# Without a KV budget, the pool holds this many full contexts; the arena's memory is only
# touched as pages are written, so an unused budget costs address space, not RAM.
DEFAULT_CONTEXTS = 4
WANT_LOGITS = ("last", "all", "none", "hidden")


def load(
    model: str | os.PathLike[str],
    threads: int | None = None,
    n_ctx: int | None = None,
    kv_memory: int | str | None = None,
    **options: Any,
) -> Model:
    """Load MODEL (a .gguf path or a store name such as `gemma3:270m`) for inference.

    threads: OpenMP threads per forward step (default: every core this process may use).
    n_ctx: the most tokens one context holds (default: min(4096, the training context)).
    kv_memory: the KV cache budget, in bytes or as a size ("2GiB"); default: room for four full
    contexts. Further options, as Model takes them: kv_type "F16" (llama.cpp's default) or
    "F32"; page_tokens, the KV page size (16, 32 or 64); n_batch, the most tokens one forward
    step takes; kernels, "best" or a kernel set ("reference", "avx2", "avx512"), every set
    giving the same logits; prefix_cache (default True): keep full KV pages in the prefix tree
    and reuse them for new contexts that start with the same tokens (False for benchmarks
    that time the same prompt again and again).
    """
    from llamay.store import resolve_model  # the store sits beside the engine; only names need it

    return Model(resolve_model(model), threads=threads, n_ctx=n_ctx, kv_memory=kv_memory, **options)


class Model:
    """A model ready to run: tokenize, make contexts, feed them. See `load` for the arguments."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        n_ctx: int | None = None,
        kv_memory: int | str | None = None,
        kv_type: str = "F16",
        page_tokens: int = 32,
        n_batch: int = DEFAULT_N_BATCH,
        kernels: str = "best",
        prefix_cache: bool = True,
    ) -> None:
        self.file = gguf.read(path)
        self.path = self.file.path
        self.arch = check_supported(self.file)
        self.hparams: HParams = from_metadata(self.file.metadata)
        hp = self.hparams
        self.threads = len(os.sched_getaffinity(0)) if threads is None else int(threads)
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, not {self.threads}")
        self.n_ctx = min(DEFAULT_N_CTX, hp.n_ctx_train) if n_ctx is None else int(n_ctx)
        if self.n_ctx < 1:
            raise ValueError(f"n_ctx must be at least 1, not {self.n_ctx}")
        if n_batch < 1:
            raise ValueError(f"n_batch must be at least 1, not {n_batch}")
        self.n_batch = n_batch
        self.tokenizer: Tokenizer = load_tokenizer(self.file)
        spec = model_spec(self.file, hp, self.n_ctx)
        self.n_vocab = spec.n_vocab

        pages_per_context = math.ceil(self.n_ctx / page_tokens)
        if kv_memory is None:
            sizing: dict[str, Any] = {"n_pages": DEFAULT_CONTEXTS * pages_per_context}
        else:
            budget = parse_size(kv_memory) if isinstance(kv_memory, str) else int(kv_memory)
            sizing = {"budget_bytes": budget}
        self.pool = PagePool(
            hp.n_layer,
            max(hp.n_head_kv),
            spec.head_dim,
            page_tokens=page_tokens,
            dtype=kv_type,
            **sizing,
        )
        self.prefix_tree = PrefixTree(self.pool.arena)
        self.prefix_cache = prefix_cache
        self._engine = Engine(spec, self.pool.arena, self.threads, n_batch, kernels)
        self.kernels = self._engine.kernels
        # One step at a time: the engine's scratch buffers are shared by every context.
        # Reentrant: a context garbage-collected inside forward_batch returns its pages there.
        self._lock = threading.RLock()
        self._open_contexts = 0
        # Made here, not on first use: two threads' first generate() must share one. Its
        # thread starts with the first generation.
        self._scheduler = Scheduler(self)

    def __repr__(self) -> str:
        return f"<llamay.Model {self.arch} {self.path.name} n_ctx={self.n_ctx}>"

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- tokens ----

    def tokenize(self, text: str, add_bos: bool = True, special: bool = True) -> list[int]:
        """Token ids of text; add_bos adds BOS where the vocabulary asks for it."""
        return self.tokenizer.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.detokenize(list(ids))

    @functools.cached_property
    def chat_template(self) -> ChatTemplate:
        """The file's chat template, or the built-in one of its family (compiled on first use)."""
        return ChatTemplate.from_gguf_metadata(self.file.metadata)

    # ---- state ----

    @property
    def page_tokens(self) -> int:
        return self.pool.arena.page_tokens

    def context(self) -> Context:
        """An empty context."""
        return Context(self)

    def generate(self, prompt: str | Sequence[int], **params: Any) -> Generation:
        """Sample tokens after a prompt (text or ids), in a fresh context or after `context`'s
        tokens; see llamay.engine.generate. Safe from many threads: their generations run
        batched together on the model's scheduler."""
        return generate(self, prompt, **params)

    def embed(self, text_or_ids: str | Sequence[int], normalize: bool = True) -> np.ndarray:
        """An embedding of the text: the mean over its tokens of the final-normed hidden state
        (float32, (n_embd,)), scaled to unit length when normalize."""
        ids = self.tokenize(text_or_ids) if isinstance(text_or_ids, str) else list(text_or_ids)
        if not ids:
            raise LlamayError("there is no text to embed")
        with self.context() as context:
            hidden = self.forward_batch([(context, ids)], "hidden")[0]
        vector = hidden.astype(np.float64).mean(axis=0)
        if normalize:
            vector /= max(float(np.linalg.norm(vector)), 1e-12)
        return vector.astype(np.float32)

    @property
    def n_embd(self) -> int:
        return self.hparams.n_embd

    def _schedule(self, generation: Generation) -> None:
        self._scheduler.submit(generation)

    def _scheduler_wake(self) -> None:
        self._scheduler.wake()

    @property
    def busy(self) -> bool:
        """Whether any context of this model is open or any generation running: closing the
        model now would pull the ground from under them."""
        return self._open_contexts > 0 or self._scheduler.n_running > 0

    def _context_opened(self) -> None:
        with self._lock:
            self._open_contexts += 1

    def _context_closed(self) -> None:
        with self._lock:
            self._open_contexts -= 1

    def kv_stats(self) -> dict[str, Any]:
        """KV page accounting: page_tokens, pages_total, pages_used, pages_free,
        bytes_per_page, dtype; pages_cached (pages the prefix tree holds, some of them also
        held by contexts), prefix_hits and prefix_misses (lookups by empty contexts that
        found a cached prefix, or none)."""
        tree = self.prefix_tree
        return self.pool.stats() | {
            "pages_cached": tree.n_pages,
            "prefix_hits": tree.hits,
            "prefix_misses": tree.misses,
        }

    def restore(self, path: str | os.PathLike[str], verify: bool = False) -> Context:
        """A context from a snapshot written by ctx.save. Refuses, allocating nothing, a
        snapshot of other weights or another KV layout (SnapshotMismatch) and a damaged,
        non-finite or newer-format file (SnapshotCorrupt).

        A snapshot is untrusted: its pages stay private to the restored context (and its
        forks), never shared through the prefix tree. With `verify` the KV is recomputed from
        the snapshot's tokens instead and compared, page by page and with the logits, bit for
        bit (SnapshotCorrupt if anything differs); the context is then an ordinary one."""
        from llamay.state.snapshot import restore

        return restore(self, path, verify=verify)

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of the model file (metadata, tensor table, tensor bytes), hex; computed once
        per file and cached under $LLAMAY_HOME."""
        return file_fingerprint(self.path)

    def close(self) -> None:
        """Frees the packed weights and scratch buffers; the model runs no step after this."""
        self._scheduler.close()
        with self._lock:
            self._engine.close()

    # ---- the forward pass ----

    def forward_batch(
        self, items: Sequence[tuple[Context, Sequence[int]]], want_logits: str = "last"
    ) -> list[np.ndarray] | None:
        """Feed each context its tokens, all in one forward pass (cut into steps of at most
        n_batch tokens), and append them to the contexts.

        want_logits: "last" keeps each context's logits after its last token (ctx.logits());
        "all" also returns, per item, the logits after every fed token (len(ids), n_vocab);
        "none" computes no logits (a prompt whose continuation is fed next); "hidden" returns,
        per item, the final-normed hidden state after every fed token (len(ids), n_embd) and
        leaves the contexts without logits (embeddings).
        Raises ContextOverflow, before anything changes, when a context would pass n_ctx or the
        KV pages run out.
        """
        if want_logits not in WANT_LOGITS:
            raise ValueError(f"want_logits must be one of {WANT_LOGITS}, not {want_logits!r}")
        feeds = [(ctx, np.asarray(ids, dtype=np.int64).reshape(-1)) for ctx, ids in items]
        self._check_feeds(feeds)
        with self._lock:
            # A prefix cut off by the cache has no logits to give, so "all" computes every one.
            reuse = self.prefix_cache and want_logits not in ("all", "hidden")
            adopted = self._adopt_prefixes(feeds) if reuse else []
            try:
                self._reserve(feeds)
            except ContextOverflow:
                for i in adopted:
                    feeds[i][0]._truncate(0)
                raise
            full_before = [ctx.n_tokens // self.page_tokens for ctx, _ in feeds]
            logits = self._run(feeds, want_logits)
            for (ctx, _), full in zip(feeds, full_before, strict=True):
                filled = ctx.n_tokens // self.page_tokens > full
                if self.prefix_cache and ctx.shares_prefix and filled:
                    self.prefix_tree.insert(ctx._tokens, ctx._page_table())
        return logits

    def _run(
        self, feeds: list[tuple[Context, np.ndarray]], want_logits: str
    ) -> list[np.ndarray] | None:
        """The forward steps of forward_batch, over pages already reserved."""
        starts = np.cumsum([0, *(len(ids) for _, ids in feeds)])
        n_tokens = int(starts[-1])
        # which tokens' logits to compute, and where they go
        if want_logits in ("all", "hidden"):
            wanted = np.arange(n_tokens, dtype=np.int32)
        elif want_logits == "last":
            wanted = (starts[1:] - 1).astype(np.int32)
        else:
            wanted = np.empty(0, dtype=np.int32)
        hidden = want_logits == "hidden"
        width = self.hparams.n_embd if hidden else self.n_vocab
        logits = np.empty((len(wanted), width), dtype=np.float32)
        tokens = np.concatenate([ids for _, ids in feeds]).astype(np.int32)
        positions = np.concatenate(
            [np.arange(ctx.n_tokens, ctx.n_tokens + len(ids)) for ctx, ids in feeds]
        ).astype(np.int32)
        sequence = np.repeat(np.arange(len(feeds), dtype=np.int32), np.diff(starts))
        tables = [ctx._page_table() for ctx, _ in feeds]
        for begin in range(0, n_tokens, self.n_batch):
            end = min(begin + self.n_batch, n_tokens)
            rows = np.flatnonzero((wanted >= begin) & (wanted < end))  # consecutive
            self._engine.step(
                tokens[begin:end],
                positions[begin:end],
                sequence[begin:end],
                tables,
                (wanted[rows] - begin).astype(np.int32),
                logits[rows[0] : rows[-1] + 1] if len(rows) else logits[:0],
                hidden,
            )
        for i, (ctx, ids) in enumerate(feeds):
            last = {"all": starts[i + 1] - 1, "last": i}.get(want_logits)
            ctx._append(ids.tolist(), None if last is None else logits[last].copy())
        if want_logits in ("all", "hidden"):
            return [logits[starts[i] : starts[i + 1]] for i in range(len(feeds))]
        return None

    def _adopt_prefixes(self, feeds: list[tuple[Context, np.ndarray]]) -> list[int]:
        """Gives each empty context the cached pages of the longest prefix of its tokens; returns
        which items took some, their ids cut to the tokens left to compute."""
        adopted = []
        for i, (ctx, ids) in enumerate(feeds):
            n_cached = self._adopt_prefix(ctx, ids)
            if n_cached:
                feeds[i] = (ctx, ids[n_cached:])
                adopted.append(i)
        return adopted

    def _adopt_prefix(self, ctx: Context, ids: Sequence[int] | np.ndarray) -> int:
        """Gives an empty context the cached pages of the longest prefix of ids (at least the
        last token is left to compute, for the logits) and appends those tokens; returns how
        many it took."""
        if ctx.n_tokens or not self.prefix_cache or len(ids) < 2:
            return 0
        with self._lock:
            pages = self.prefix_tree.match([int(t) for t in ids[:-1]])
            if not pages:
                return 0
            for page in pages:
                self.pool.arena.incref(page)
            ctx._add_pages(np.asarray(pages, dtype=np.int32))
            n_cached = len(pages) * self.page_tokens
            ctx._append([int(t) for t in ids[:n_cached]], None)
            return n_cached

    def _check_feeds(self, feeds: list[tuple[Context, np.ndarray]]) -> None:
        seen = set()
        for ctx, ids in feeds:
            if ctx.model is not self:
                raise ValueError("a context of another model was given to forward_batch")
            if id(ctx) in seen:
                raise ValueError("a context appears twice in one forward_batch; join its tokens")
            seen.add(id(ctx))
            ctx._check_open()
            if len(ids) == 0:
                raise ValueError("an item of forward_batch has no tokens")
            if ids.min() < 0 or ids.max() >= self.n_vocab:
                bad = int(ids[(ids < 0) | (ids >= self.n_vocab)][0])
                raise ValueError(
                    f"token id {bad} is out of range: the model has {self.n_vocab} tokens"
                )
            if ctx.n_tokens + len(ids) > self.n_ctx:
                raise ContextOverflow(
                    f"the context is full: {ctx.n_tokens} tokens plus {len(ids)} new ones exceed "
                    f"n_ctx = {self.n_ctx}; start a new context, or load the model with a "
                    "larger n_ctx"
                )

    def _reserve(self, feeds: list[tuple[Context, np.ndarray]]) -> None:
        """Makes every new position writable, for all contexts or (ContextOverflow) for none:
        new pages past each context's last one, and a private copy of a partial last page
        that another context or the prefix tree shares (copy-on-write)."""
        arena = self.pool.arena
        needed = [ctx._pages_needed(len(ids)) for ctx, ids in feeds]
        shared = [ctx._shared_tail() for ctx, _ in feeds]
        total = sum(needed) + sum(index is not None for index in shared)
        self._make_room(total)
        for (ctx, _), n, index in zip(feeds, needed, shared, strict=True):
            if index is not None:
                old = int(ctx._page_table()[index])
                copy = arena.alloc()
                arena.copy_page(old, copy)
                arena.decref(old)
                ctx._replace_page(index, copy)
            if n:
                ctx._add_pages(arena.alloc_many(n))

    def _make_room(self, n_pages: int) -> None:
        """Evicts cached pages until n_pages are free; KVCacheFull (a ContextOverflow with the
        arena's message, nothing allocated) when even that is not enough."""
        arena = self.pool.arena
        if n_pages > arena.n_free:
            self.prefix_tree.evict(n_pages - arena.n_free)
        if n_pages > arena.n_free:
            try:
                arena.alloc_many(n_pages)
            except ContextOverflow as full:
                raise KVCacheFull(str(full)) from None

    def _release(self, pages: np.ndarray) -> None:
        """Drops a context's references to its pages."""
        with self._lock:
            for page in pages:
                self.pool.arena.decref(int(page))
