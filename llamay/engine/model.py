"""A loaded model: its file, tokenizer and chat template, its KV cache, and the forward step.

`Model(path)` maps the file (weights stay where they lie; a backend may pack the matrices its
kernels read in another layout), reads the hyperparameters through the family zoo, binds the
backend (llamay/backends) and builds the KV cache (llamay/state) over the backend's pages.
Contexts hold the state; `forward_batch` runs one forward pass over several of them, cut into
steps of at most `n_batch` tokens, taking cached prefixes from the prefix tree and copying
shared pages before it writes them (KVCache.reserve).

A name from the store (`gemma3:270m`) is resolved by `llamay.load`, at the top of the package;
here MODEL is a path.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from llamay import backends, gguf
from llamay._core._cpu import cpu_count
from llamay.backends import Batch
from llamay.engine.draft import MIN_PROBABILITY, check_vocabulary
from llamay.engine.generate import Generation, generate
from llamay.engine.pooling import RankHead, finished, pooled
from llamay.engine.ranges import check
from llamay.engine.scheduler import Scheduler
from llamay.errors import ContextOverflow, LlamayError
from llamay.models.hparams import HParams, from_metadata
from llamay.models.registry import check_supported
from llamay.models.spec import model_spec
from llamay.state import Context, KVCache, KVLayout, ModelIdentity, parse_size
from llamay.state.fingerprint import file_fingerprint
from llamay.tokenizer import Tokenizer, read_tokenizer
from llamay.tokenizer.chat import ChatTemplate
from llamay.tokenizer.fim import fim_prompt

DEFAULT_N_CTX = 4096  # llama.cpp's default context, capped by what the model was trained for
# Tokens per forward step: prefill is as fast in steps of 128 as of 512 (within 3%), and the
# scratch buffers, sized for a step, take a quarter of the memory.
DEFAULT_N_BATCH = 128
# Without a KV budget, the cache holds this many full contexts; the pages' memory is only
# touched as pages are written, so an unused budget costs address space, not RAM.
DEFAULT_CONTEXTS = 4
WANT_LOGITS = ("last", "all", "none", "hidden")


class Model:
    """A model ready to run: tokenize, make contexts, feed them. See `llamay.load` for the
    arguments; `backend` picks how it runs ("cpu", the default, or "reference")."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        n_ctx: int | None = None,
        kv_memory: int | str | None = None,
        kv_type: str | None = None,
        page_tokens: int = 32,
        n_batch: int = DEFAULT_N_BATCH,
        kernels: str | None = None,
        prefix_cache: bool = True,
        backend: str = "cpu",
        lookup: int = 0,
        draft: str | os.PathLike[str] | Model | None = None,
        draft_p_min: float = MIN_PROBABILITY,
        kv_tokens: int | None = None,
    ) -> None:
        self.file = gguf.read(path)
        self.path = self.file.path
        self.arch = check_supported(self.file)
        self.hparams: HParams = from_metadata(self.file.metadata)
        hp = self.hparams
        self.threads = cpu_count() if threads is None else int(threads)
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, not {self.threads}")
        self.n_ctx = min(DEFAULT_N_CTX, hp.n_ctx_train) if n_ctx is None else int(n_ctx)
        if self.n_ctx < 1:
            raise ValueError(f"n_ctx must be at least 1, not {self.n_ctx}")
        if n_batch < 1:
            raise ValueError(f"n_batch must be at least 1, not {n_batch}")
        if not hp.causal:
            # An encoder's token sees every token of its sequence, so a sequence runs in one
            # step (as llama.cpp requires n_ubatch >= n_tokens), and a prefix's pages depend
            # on what follows it: nothing is shared through the prefix tree.
            n_batch = max(n_batch, self.n_ctx)
            prefix_cache = False
        self.n_batch = n_batch
        check("lookup", lookup)
        # generate()'s prompt-lookup default: a speed knob only, the tokens are the same bits
        self.lookup = lookup
        self.tokenizer: Tokenizer = read_tokenizer(self.file)
        spec = model_spec(self.file, hp, self.n_ctx)
        self.n_vocab = spec.n_vocab
        # how embed() pools (llamay.engine.pooling), and a reranker's head
        self.pooling: str = hp.pooling
        self._rank_head = RankHead(spec) if hp.pooling == "rank" else None

        if kv_type is None:
            # llama.cpp's default is an F16 cache; an encoder has no cache there, its keys and
            # values stay float32 (and rounding them to F16 moves a Q8_0 nomic-bert's
            # embeddings from 0.9999992 to 0.99993 cosine of llama.cpp's)
            kv_type = "F16" if hp.causal else "F32"
        try:
            layout = KVLayout(
                hp.n_layer, max(hp.n_head_kv), spec.head_dim, page_tokens, kv_type.upper()
            )
        except ValueError as exc:  # a KV type, page size or head size that cannot be
            raise LlamayError(str(exc)) from None
        if kv_tokens is not None:  # a draft model's cache: as many tokens as its target's
            n_pages = math.ceil(kv_tokens / page_tokens)
        elif kv_memory is None:
            n_pages = DEFAULT_CONTEXTS * math.ceil(self.n_ctx / page_tokens)
        else:
            budget = parse_size(kv_memory) if isinstance(kv_memory, str) else int(kv_memory)
            n_pages = layout.n_pages_for(budget)
        self.backend = backends.backend(backend)
        too_big = LlamayError(
            f"a context of {self.n_ctx} tokens does not fit in memory (its KV cache alone is "
            f"{n_pages} pages, {n_pages * layout.page_bytes / 2**30:.1f} GiB): give a smaller "
            "n_ctx (--ctx-size) or kv_memory (--kv-memory)"
        )
        if n_pages >= 2**31:  # page ids are int32; no machine holds that many pages either
            raise too_big
        try:
            self.executor = self.backend.bind(
                spec,
                layout,
                n_pages,
                threads=self.threads,
                max_tokens=n_batch,
                kernels=kernels,
            )
        except MemoryError:
            raise too_big from None
        self.kernels: str = self.executor.kernels
        self.kv_cache = KVCache(layout, n_pages, self.executor.storage, prefix_cache=prefix_cache)
        # Made here, not on first use: two threads' first generate() must share one. Its
        # thread starts with the first generation.
        self.scheduler = Scheduler(self)
        # generate()'s default draft model (draft.py): loaded here from a path, which this
        # model then owns and closes, or a model the caller loaded and closes
        self.draft: Model | None = None
        self._owns_draft = False
        if not 0 <= draft_p_min <= 1:
            raise ValueError(f"draft_p_min must be in [0, 1], not {draft_p_min}")
        self.draft_p_min = float(draft_p_min)
        if draft is not None:
            self._attach_draft(draft, backend, kernels, kv_type)

    def _attach_draft(
        self, draft: str | os.PathLike[str] | Model, backend: str, kernels: str | None, kv_type: str
    ) -> None:
        """Takes (or loads) the draft model: the same context size, threads and kernel set, and
        a KV cache of as many tokens as this one's; refused, by what differs, when its
        vocabulary is not this model's."""
        if isinstance(draft, Model):
            check_vocabulary(self, draft)
            self.draft = draft
            return
        loaded = Model(
            draft,
            threads=self.threads,
            n_ctx=self.n_ctx,
            kv_memory=None,
            kv_type=kv_type,
            page_tokens=self.page_tokens,
            n_batch=self.n_batch,
            kernels=self.kernels if backend == "cpu" else None,
            backend=backend,
            kv_tokens=self.kv_cache.stats()["pages_total"] * self.page_tokens,
        )
        try:
            check_vocabulary(self, loaded)
        except LlamayError:
            loaded.close()
            raise
        self.draft, self._owns_draft = loaded, True

    @property
    def memory_bytes(self) -> int:
        """What the model takes in memory: its file's weights and its KV cache's budget, and
        its draft model's (the figure a server's --max-memory counts)."""
        stats = self.kv_cache.stats()
        own = self.path.stat().st_size + stats["pages_total"] * stats["bytes_per_page"]
        return own + (self.draft.memory_bytes if self._owns_draft and self.draft else 0)

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
        return self.kv_cache.page_tokens

    @property
    def kv_type(self) -> str:
        """The KV cache's element type: "F16", "F32" or "Q8_0"."""
        return self.kv_cache.layout.dtype

    def context(self) -> Context:
        """An empty context."""
        return Context(self)

    def generate(self, prompt: str | Sequence[int], **params: Any) -> Generation:
        """Sample tokens after a prompt (text or ids), in a fresh context or after `context`'s
        tokens; see llamay.engine.generate. Safe from many threads: their generations run
        batched together on the model's scheduler."""
        return generate(self, prompt, **params)

    def infill(
        self,
        prefix: str,
        suffix: str,
        *,
        middle: str = "",
        extra: Sequence[tuple[str, str]] | None = None,
        **params: Any,
    ) -> Generation:
        """Generate the code between `prefix` and `suffix` (fill in the middle), as generate()
        does with `params`: `middle` is text already written after the prefix, `extra` other
        files of the project as (filename, text) pairs (llamay.tokenizer.fim says how the
        prompt is made and cut to fit). InfillUnsupported for a model without FIM tokens."""
        ids = fim_prompt(
            self.tokenizer,
            prefix,
            suffix,
            middle=middle,
            extra=extra,
            n_ctx=self.n_ctx,
            reserve=params.get("max_tokens"),
            name=self.path.name,
        )
        return self.generate(ids, **params)

    def embed(
        self,
        text_or_ids: str | Sequence[int],
        normalize: bool = True,
        dimensions: int | None = None,
    ) -> np.ndarray:
        """An embedding of the text (float32): its hidden states pooled as the file says
        (`pooling`: mean, cls or last; a decoder's: the mean of its final-normed states), the
        first `dimensions` components kept (Matryoshka), scaled to unit length when
        normalize."""
        return self.embed_many([text_or_ids], normalize, dimensions)[0]

    def embed_many(
        self,
        inputs: Sequence[str | Sequence[int]],
        normalize: bool = True,
        dimensions: int | None = None,
    ) -> list[np.ndarray]:
        """The embedding of each input (see embed), computed in shared forward passes: each
        is the same, bit for bit, as when embedded alone."""
        if self._rank_head is not None:
            raise LlamayError(
                f"{self.path.name} is a reranker (pooling_type rank): it scores query and "
                "document pairs (Model.rerank, /v1/rerank), and gives no embeddings"
            )
        vectors = self._pooled([self._ids(item) for item in inputs])
        return [finished(vector, normalize, dimensions) for vector in vectors]

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """A cross-encoder's relevance score of each document for the query (the classification
        head's first output, unbounded, as llama.cpp's), each pair tokenized as
        [CLS] query [SEP] document [SEP] (BOS query EOS/SEP document for other vocabularies)."""
        head = self.tokenize(query)
        return self.rerank_ids([head + self.tokenize(doc, add_bos=False) for doc in documents])

    def rerank_ids(self, sequences: Sequence[Sequence[int]]) -> list[float]:
        """The classification head's first output for each token sequence (a pair already
        joined), each the same bit for bit whatever else shares its forward pass."""
        if self._rank_head is None:
            raise LlamayError(
                f"{self.path.name} is not a reranker: it has no classification head "
                f"(pooling_type is {self.pooling})"
            )
        sequences = [self._ids(ids) for ids in sequences]
        return [float(self._rank_head.scores(v)[0]) for v in self._pooled(sequences)]

    @property
    def is_reranker(self) -> bool:
        return self._rank_head is not None

    def _ids(self, text_or_ids: str | Sequence[int]) -> list[int]:
        ids = self.tokenize(text_or_ids) if isinstance(text_or_ids, str) else list(text_or_ids)
        if not ids:
            raise LlamayError("there is no text to embed")
        return ids

    def _pooled(self, sequences: list[list[int]]) -> list[np.ndarray]:
        """Each sequence's pooled hidden state, in groups that fit a step and the KV pages."""
        budget = max(1, self.kv_cache.stats()["pages_total"] // 2)
        vectors: list[np.ndarray] = []
        start = 0
        while start < len(sequences):
            end, tokens, pages = start, 0, 0
            while end < len(sequences):
                n = len(sequences[end])
                need = -(-n // self.page_tokens)
                if end > start and (tokens + n > self.n_batch or pages + need > budget):
                    break
                end, tokens, pages = end + 1, tokens + n, pages + need
            contexts = [self.context() for _ in range(start, end)]
            try:
                items = list(zip(contexts, sequences[start:end], strict=True))
                hidden = self.forward_batch(items, "hidden")
            finally:
                for context in contexts:
                    context.close()
            vectors += [pooled(h, self.pooling) for h in hidden]
            start = end
        return vectors

    @property
    def n_embd(self) -> int:
        return self.hparams.n_embd

    @property
    def busy(self) -> bool:
        """Whether any context of this model is open or any generation running: closing the
        model now would pull the ground from under them."""
        return self.kv_cache.n_contexts > 0 or self.scheduler.n_running > 0

    def kv_stats(self) -> dict[str, Any]:
        """KV page accounting (KVCache.stats): page_tokens, pages_total, pages_used,
        pages_free, bytes_per_page, dtype, pages_cached, prefix_hits, prefix_misses."""
        return self.kv_cache.stats()

    def restore(self, path: str | os.PathLike[str], *, verify: bool = False) -> Context:
        """A context from a snapshot written by ctx.save. Refuses, allocating nothing, a
        snapshot of other weights, another backend's determinism class or another KV layout
        (SnapshotMismatch) and a damaged or newer-format file (SnapshotCorrupt). Its pages
        stay its own (never shared through the prefix tree) unless `verify` recomputes them
        (Context.restore)."""
        return Context.restore(self, path, verify=verify)

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of the model file (metadata, tensor table, tensor bytes), hex; computed once
        per file and cached under $LLAMAY_HOME."""
        return file_fingerprint(self.path)

    @property
    def identity(self) -> ModelIdentity:
        """What a snapshot records of this model."""
        return ModelIdentity(
            fingerprint=self.fingerprint,
            name=self.path.name,
            n_vocab=self.n_vocab,
            n_ctx=self.n_ctx,
            backend=self.backend.name,
            determinism=self.backend.determinism,
            kernels=self.kernels,
        )

    def close(self) -> None:
        """Frees the weights the backend holds and its scratch buffers; the model runs no
        step after this."""
        self.scheduler.close()
        with self.kv_cache.lock:
            self.executor.close()
        if self._owns_draft and self.draft is not None:
            self.draft.close()

    # ---- the forward pass ----

    def forward_batch(
        self,
        items: Sequence[tuple[Context, Sequence[int]]],
        want_logits: str | Sequence[str] = "last",
    ) -> list[np.ndarray | None] | None:
        """Feed each context its tokens, all in one forward pass (cut into steps of at most
        n_batch tokens), and append them to the contexts.

        want_logits: "last" keeps each context's logits after its last token (ctx.logits());
        "all" also returns, per item, the logits after every fed token (len(ids), n_vocab);
        "none" computes no logits (a prompt whose continuation is fed next); "hidden" returns,
        per item, the final-normed hidden state after every fed token (len(ids), n_embd) and
        leaves the contexts without logits (embeddings). A sequence gives each item its own
        of "last", "all" and "none" (the scheduler's speculative steps); the result then has
        an entry per item, None for those that are not "all".
        Raises ContextOverflow, before anything changes, when a context would pass n_ctx or the
        KV pages run out.
        """
        per_item = not isinstance(want_logits, str)
        modes = list(want_logits) if per_item else [want_logits] * len(items)
        if len(modes) != len(items) or not set(modes) <= set(WANT_LOGITS):
            raise ValueError(f"want_logits must be one of {WANT_LOGITS} per item, not {modes!r}")
        if per_item and "hidden" in modes:
            raise ValueError("hidden states are wanted for a whole batch or not at all")
        feeds = [(ctx, np.asarray(ids, dtype=np.int64).reshape(-1)) for ctx, ids in items]
        self._check_feeds(feeds)
        cache = self.kv_cache
        # One step at a time (the executor's scratch is shared by every context), and no page
        # bookkeeping while one runs.
        with cache.lock:
            # A prefix cut off by the cache has no logits to give, so "all" computes every one.
            adopted = []
            for i, ((ctx, ids), mode) in enumerate(zip(feeds, modes, strict=True)):
                if mode not in ("all", "hidden"):
                    n_cached = ctx.adopt_prefix(ids)
                    if n_cached:
                        feeds[i] = (ctx, ids[n_cached:])
                        adopted.append(ctx)
            try:
                cache.reserve([(ctx.page_list, ctx.n_tokens, len(ids)) for ctx, ids in feeds])
            except ContextOverflow:
                for ctx in adopted:
                    ctx.rewind(0)
                raise
            outputs = self._run(feeds, modes)
        if per_item:
            return outputs
        return outputs if want_logits in ("all", "hidden") else None

    def _run(
        self, feeds: list[tuple[Context, np.ndarray]], modes: list[str]
    ) -> list[np.ndarray | None]:
        """The forward steps of forward_batch, over pages already reserved; each item's rows
        of outputs where its mode is "all" or "hidden", else None."""
        starts = np.cumsum([0, *(len(ids) for _, ids in feeds)])
        # which tokens' outputs to compute (in batch order), and where each item's rows begin
        wanted_parts = []
        for i, mode in enumerate(modes):
            if mode in ("all", "hidden"):
                wanted_parts.append(np.arange(starts[i], starts[i + 1]))
            elif mode == "last":
                wanted_parts.append(np.array([starts[i + 1] - 1]))
            else:
                wanted_parts.append(np.empty(0, dtype=np.int64))
        row_starts = np.cumsum([0, *(len(part) for part in wanted_parts)])
        wanted = np.concatenate(wanted_parts).astype(np.int32)
        hidden = "hidden" in modes
        width = self.hparams.n_embd if hidden else self.n_vocab
        logits = np.empty((len(wanted), width), dtype=np.float32)
        tokens = np.concatenate([ids for _, ids in feeds]).astype(np.int32)
        positions = np.concatenate(
            [np.arange(ctx.n_tokens, ctx.n_tokens + len(ids)) for ctx, ids in feeds]
        ).astype(np.int32)
        sequence = np.repeat(np.arange(len(feeds), dtype=np.int32), np.diff(starts))
        tables = [ctx.page_list.ids for ctx, _ in feeds]
        if not all(self.kv_cache.in_use(table) for table in tables):
            raise LlamayError("a page table names a page not in use: the KV state is damaged")
        for begin, end in self._steps(starts):
            rows = np.flatnonzero((wanted >= begin) & (wanted < end))  # consecutive
            self.executor.step(
                Batch(
                    tokens=tokens[begin:end],
                    positions=positions[begin:end],
                    sequence=sequence[begin:end],
                    page_tables=tables,
                    outputs=(wanted[rows] - begin).astype(np.int32),
                    out=logits[rows[0] : rows[-1] + 1] if len(rows) else logits[:0],
                    hidden=hidden,
                )
            )
        outputs: list[np.ndarray | None] = []
        for i, ((ctx, ids), mode) in enumerate(zip(feeds, modes, strict=True)):
            mine = logits[row_starts[i] : row_starts[i + 1]]
            # a row of this step's own array, which no one else holds, unless the caller gets
            # the rows too ("all"): no 512 KB copy per sequence and step of a 128k vocabulary
            last = mine[-1] if mode == "last" else mine[-1].copy() if mode == "all" else None
            ctx.record(ids.tolist(), last)
            outputs.append(mine if mode in ("all", "hidden") else None)
        return outputs

    def _steps(self, starts: np.ndarray) -> list[tuple[int, int]]:
        """The steps' token ranges: n_batch tokens each; for an encoder whole items, as many as
        fit (each item fits: n_batch >= n_ctx)."""
        n_tokens = int(starts[-1])
        if self.hparams.causal:
            return [(b, min(b + self.n_batch, n_tokens)) for b in range(0, n_tokens, self.n_batch)]
        steps, begin = [], 0
        for end, next_end in zip(starts[1:], [*starts[2:], None], strict=True):
            if next_end is None or next_end - begin > self.n_batch:
                steps.append((begin, int(end)))
                begin = int(end)
        return steps

    def _check_feeds(self, feeds: list[tuple[Context, np.ndarray]]) -> None:
        seen = set()
        for ctx, ids in feeds:
            if ctx.model is not self:
                raise ValueError("a context of another model was given to forward_batch")
            if id(ctx) in seen:
                raise ValueError("a context appears twice in one forward_batch; join its tokens")
            seen.add(id(ctx))
            ctx.check_open()
            if not self.hparams.causal and ctx.n_tokens:
                raise LlamayError(
                    f"{self.path.name} is an encoder (an embedding or reranking model): it "
                    "does not generate text, and its tokens see the whole input, which must "
                    "come in one feed to an empty context; use embed() or rerank()"
                )
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
