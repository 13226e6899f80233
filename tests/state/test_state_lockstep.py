"""The state engine in lockstep with a reference: random create / feed / fork / rewind /
snapshot / restore / tamper / evict / close sequences on a tiny model with a small KV budget
(so that the prefix tree evicts and feeds meet a full cache), against plain token lists whose
logits and KV come from a cold recompute on a separate model instance.

After every step: each context's tokens equal the reference's; its logits and the KV of its
positions are `==` the cold recompute's; every page's refcount equals its holders (contexts + the prefix tree); used + free
== total. At teardown nothing is left allocated. Bounded for CI; `LLAMAY_STRESS_EXAMPLES`
(tox -e stress) runs longer. The same machine runs on the CPU backend and on the reference
backend (fewer examples: it is slow), so the state engine is proved over the backend seam, not
over one backend's memory.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

import llamay
from llamay.errors import ContextOverflow, SnapshotCorrupt

QWEN2 = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"
EXAMPLES = int(os.environ.get("LLAMAY_STRESS_EXAMPLES", "30"))
N_CTX = 64
# A few shared openings make prefix hits common; the rest of a feed is random.
OPENINGS = [[], [5] * 16, [9, 10, 11, 12] * 4, [5] * 16 + [7] * 16]


def kv(ctx: llamay.engine.Context) -> np.ndarray:
    """K and V of the context's positions (not the unwritten slots after them), read through
    the backend's page storage in the canonical layout."""
    cache = ctx.model.kv_cache
    p = cache.page_tokens
    return np.concatenate(
        [
            cache.layout.positions(cache.storage.read(page), min(p, ctx.n_tokens - i * p))
            for i, page in enumerate(ctx.pages)
        ],
        axis=1,
    )


class Entry:
    """A context under test and the reference tokens it must hold."""

    def __init__(self, ctx: llamay.engine.Context, tokens: list[int]) -> None:
        self.ctx = ctx
        self.tokens = tokens


class StateEngine(RuleBasedStateMachine):
    """The machine over MODEL (a small KV budget) and COLD (a second instance, for cold
    recomputes); subclasses choose the backend."""

    contexts = Bundle("contexts")
    MODEL: llamay.engine.Model
    COLD: llamay.engine.Model

    def cold_state(self, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The logits and KV of tokens, computed from scratch."""
        with self.COLD.context() as ctx:
            ctx.feed(tokens, all_logits=True)  # "all" never takes cached pages
            return ctx.logits(), kv(ctx)

    def __init__(self) -> None:
        super().__init__()
        self.live: list[Entry] = []
        self.dir = Path(tempfile.mkdtemp(prefix="llamay-lockstep-"))
        self.n_saved = 0
        # reference states by tokens, for this example only (a long run would hoard them)
        self.cold: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def _keep(self, entry: Entry) -> Entry:
        self.live.append(entry)
        return entry

    @initialize(target=contexts, opening=st.sampled_from(OPENINGS), n=st.integers(1, 40))
    def start(self, opening: list[int], n: int) -> Entry:
        entry = self._keep(Entry(self.MODEL.context(), []))
        self._feed(entry, opening + [100 + i for i in range(n)])
        return entry

    @rule(target=contexts)
    def create(self) -> Entry:
        return self._keep(Entry(self.MODEL.context(), []))

    @rule(target=contexts, entry=contexts, first=st.integers(3, 2000), second=st.integers(3, 2000))
    def branch(self, entry: Entry, first: int, second: int) -> Entry:
        """Forks, then feeds parent and child different tokens: both write the shared page."""
        child = self._keep(Entry(entry.ctx.fork(), list(entry.tokens)))
        self._feed(child, [first])
        self._feed(entry, [second])
        return child

    @rule(
        entry=contexts,
        opening=st.sampled_from(OPENINGS),
        rest=st.lists(st.integers(3, 2000), min_size=1, max_size=20),
    )
    def feed(self, entry: Entry, opening: list[int], rest: list[int]) -> None:
        self._feed(entry, (opening if not entry.tokens else []) + rest)

    def _feed(self, entry: Entry, ids: list[int]) -> None:
        before = self.MODEL.kv_stats()
        try:
            entry.ctx.feed(ids)
        except ContextOverflow:
            assert entry.ctx.tokens == entry.tokens
            assert self.MODEL.kv_stats()["pages_used"] <= before["pages_used"]  # only evictions
            return
        entry.tokens = entry.tokens + ids

    @rule(target=contexts, entry=contexts)
    def fork(self, entry: Entry) -> Entry:
        used = self.MODEL.kv_stats()["pages_used"]
        child = entry.ctx.fork()
        assert self.MODEL.kv_stats()["pages_used"] == used
        return self._keep(Entry(child, list(entry.tokens)))

    @rule(entry=contexts, fraction=st.floats(0, 1))
    def rewind(self, entry: Entry, fraction: float) -> None:
        n = int(len(entry.tokens) * fraction)
        try:
            entry.ctx.rewind(n)
        except ContextOverflow:  # no room to copy a shared page: nothing changed
            assert entry.ctx.tokens == entry.tokens
            return
        entry.tokens = entry.tokens[:n]

    @rule(target=contexts, entry=contexts)
    def snapshot_restore(self, entry: Entry) -> Entry:
        path = self.dir / f"{self.n_saved}.kv"
        self.n_saved += 1
        entry.ctx.save(path)
        try:
            restored = self.MODEL.restore(path)
        except ContextOverflow:
            restored = self.MODEL.context()
            return self._keep(Entry(restored, []))
        return self._keep(Entry(restored, list(entry.tokens)))

    @rule(entry=contexts, where=st.integers(0, 1 << 30), bit=st.integers(0, 7))
    def tamper(self, entry: Entry, where: int, bit: int) -> None:
        path = self.dir / "tampered.kv"
        entry.ctx.save(path)
        data = bytearray(path.read_bytes())
        data[where % len(data)] ^= 1 << bit
        path.write_bytes(bytes(data))
        before = self.MODEL.kv_stats()
        try:
            self.MODEL.restore(path)
        except SnapshotCorrupt:
            assert self.MODEL.kv_stats() == before
        else:
            raise AssertionError("a tampered snapshot was restored")

    @rule(n=st.integers(1, 12))
    def evict(self, n: int) -> None:
        self.MODEL.kv_cache.evict(n)

    @rule(entry=consumes(contexts))
    def close(self, entry: Entry) -> None:
        entry.ctx.close()
        self.live.remove(entry)

    @invariant()
    def contexts_match_the_reference(self) -> None:
        for entry in self.live:
            assert entry.ctx.tokens == entry.tokens
            if entry.tokens:
                key = tuple(entry.tokens)
                if key not in self.cold:
                    self.cold[key] = self.cold_state(entry.tokens)
                logits, keys_values = self.cold[key]
                assert np.array_equal(entry.ctx.logits(), logits)
                assert np.array_equal(kv(entry.ctx), keys_values)

    @invariant()
    def every_page_is_held_by_exactly_its_holders(self) -> None:
        holders = Counter(p for e in self.live for p in e.ctx.pages)
        holders += Counter(self.MODEL.kv_cache.tree.pages())
        cache = self.MODEL.kv_cache
        counts = {p: cache.refcount(p) for p in range(cache.n_pages) if cache.refcount(p)}
        assert counts == holders
        stats = self.MODEL.kv_stats()
        assert stats["pages_used"] == len(holders)
        assert stats["pages_used"] + stats["pages_free"] == stats["pages_total"]
        assert stats["pages_cached"] == len(cache.tree.pages())

    @invariant()
    def restored_pages_never_reach_the_prefix_tree(self) -> None:
        cached = set(self.MODEL.kv_cache.tree.pages())
        for entry in self.live:
            if not entry.ctx.trusted:
                assert cached.isdisjoint(entry.ctx.pages[: entry.ctx.n_tokens // 16])

    def teardown(self) -> None:
        for entry in self.live:
            entry.ctx.close()
        self.MODEL.kv_cache.clear_prefix_cache()
        assert self.MODEL.kv_stats()["pages_used"] == 0
        for path in self.dir.iterdir():
            path.unlink()
        self.dir.rmdir()


def machine(backend: str, examples: int) -> type:
    class OnBackend(StateEngine):
        MODEL = llamay.load(
            QWEN2, threads=1, n_ctx=N_CTX, page_tokens=16, kv_memory=12 * 32768, backend=backend
        )
        COLD = llamay.load(QWEN2, threads=1, n_ctx=N_CTX, page_tokens=16, backend=backend)

    test = OnBackend.TestCase
    test.settings = settings(
        max_examples=examples,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    return test


TestStateEngineCpu = machine("cpu", EXAMPLES)
TestStateEngineReference = machine("reference", max(5, EXAMPLES // 5))
