"""Contexts as objects: fork (copy-on-write), rewind, close; and the prefix tree's reuse. Every
continuation is checked `==` against a cold recompute on a separate model instance."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay.errors import ContextOverflow

QWEN2 = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"
P = 16


def load(**options) -> llamay.engine.Model:
    return llamay.load(QWEN2, threads=1, n_ctx=256, page_tokens=P, **options)


@pytest.fixture(scope="module")
def cold() -> llamay.engine.Model:
    return load()


def cold_logits(cold, tokens) -> np.ndarray:
    with cold.context() as ctx:
        ctx.feed(tokens, all_logits=True)  # "all" never takes cached pages
        return ctx.logits()


def check_holders(model, contexts) -> None:
    holders = Counter(p for ctx in contexts for p in ctx.pages) + Counter(
        model.kv_cache.tree.pages()
    )
    cache = model.kv_cache
    assert {p: cache.refcount(p) for p in range(cache.n_pages) if cache.refcount(p)} == holders
    stats = model.kv_stats()
    assert stats["pages_used"] == len(holders)
    assert stats["pages_used"] + stats["pages_free"] == stats["pages_total"]


def tokens(n: int, start: int = 7) -> list[int]:
    return [(start + 37 * i) % 2000 + 3 for i in range(n)]


def test_logits_are_a_copy_or_a_read_only_view():
    model = load()
    with model.context() as ctx:
        ctx.feed(tokens(20))
        mine = ctx.logits()
        mine[:] = 0  # the caller's own copy
        view = ctx.logits(copy=False)
        assert np.array_equal(view, cold_logits(model, tokens(20)))
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 1.0
        ctx.feed(tokens(1, start=5))
        # the next token's logits are a new array: the view still holds the old ones
        assert np.array_equal(view, cold_logits(model, tokens(20)))
        assert not np.array_equal(ctx.logits(copy=False), view)


def test_fork_shares_every_page_and_allocates_none():
    model = load()
    ctx = model.context()
    ctx.feed(tokens(100))
    used = model.kv_stats()["pages_used"]
    forks = [ctx.fork() for _ in range(8)]
    assert model.kv_stats()["pages_used"] == used
    assert all(f.pages == ctx.pages and f.tokens == ctx.tokens for f in forks)
    assert all(np.array_equal(f.logits(), ctx.logits()) for f in forks)
    check_holders(model, [ctx, *forks])


def test_page_sharing_counts_pages_other_contexts_hold_not_the_prefix_cache():
    model = load()
    parent = model.context()
    parent.feed(tokens(40))  # pages 0, 1 full (the prefix tree caches them too); page 2 partial
    assert len(model.kv_cache.tree.pages()) == 2
    assert parent.page_sharing() == {"total": 3, "shared": 0, "own": 3}
    child = parent.fork()
    assert child.page_sharing() == parent.page_sharing() == {"total": 3, "shared": 3, "own": 0}
    child.feed(tokens(30, start=5))  # its copy of page 2, then pages 3 and 4
    assert child.page_sharing() == {"total": 5, "shared": 2, "own": 3}
    assert parent.page_sharing() == {"total": 3, "shared": 2, "own": 1}
    child.close()
    assert parent.page_sharing() == {"total": 3, "shared": 0, "own": 3}
    parent.close()
    with pytest.raises(llamay.LlamayError, match="closed"):
        parent.page_sharing()


def test_the_first_write_into_a_shared_partial_page_copies_it(cold):
    model = load()
    parent = model.context()
    parent.feed(tokens(40))  # pages 0, 1 full; page 2 partial
    child = parent.fork()
    used = model.kv_stats()["pages_used"]
    child.feed([11, 12])
    assert child.pages[:2] == parent.pages[:2] and child.pages[2] != parent.pages[2]
    assert model.kv_stats()["pages_used"] == used + 1
    parent.feed([13])  # its page is no longer shared: written in place
    assert model.kv_stats()["pages_used"] == used + 1
    assert np.array_equal(child.logits(), cold_logits(cold, [*tokens(40), 11, 12]))
    assert np.array_equal(parent.logits(), cold_logits(cold, [*tokens(40), 13]))
    check_holders(model, [parent, child])


def test_forks_continue_exactly_as_a_cold_recompute(cold):
    model = load()
    base = model.context()
    base.feed(tokens(33))
    branches = [base.fork() for _ in range(3)]
    for i, branch in enumerate(branches):
        branch.feed(tokens(5 + i, start=100 * i))
    model.forward_batch([(branch, [42 + i]) for i, branch in enumerate(branches)])
    for i, branch in enumerate(branches):
        expected = tokens(33) + tokens(5 + i, start=100 * i) + [42 + i]
        assert branch.tokens == expected
        assert np.array_equal(branch.logits(), cold_logits(cold, expected))
    check_holders(model, [base, *branches])


@pytest.mark.parametrize("keep", [0, 1, 15, 16, 17, 40])
def test_rewind_drops_pages_and_continues_exactly(cold, keep):
    model = load()
    ctx = model.context()
    ctx.feed(tokens(45))
    other = ctx.fork()
    ctx.rewind(keep)
    assert ctx.tokens == tokens(45)[:keep]
    assert len(ctx.pages) == -(-keep // P)
    if keep:
        assert np.array_equal(ctx.logits(), cold_logits(cold, tokens(keep)))
    ctx.feed([9, 8, 7])
    assert np.array_equal(ctx.logits(), cold_logits(cold, [*tokens(45)[:keep], 9, 8, 7]))
    assert other.tokens == tokens(45)  # the fork it shared pages with is untouched
    other.feed([5])
    assert np.array_equal(other.logits(), cold_logits(cold, [*tokens(45), 5]))
    check_holders(model, [ctx, other])


def test_rewind_refuses_a_length_it_does_not_have():
    model = load()
    ctx = model.context()
    ctx.feed(tokens(5))
    with pytest.raises(ValueError, match="cannot rewind to 6 tokens: the context has 5"):
        ctx.rewind(6)


def test_closing_and_dropping_contexts_returns_their_pages():
    model = load()
    ctx = model.context()
    ctx.feed(tokens(20))
    fork = ctx.fork()
    ctx.close()
    check_holders(model, [fork])
    del fork
    check_holders(model, [])
    assert model.kv_stats()["pages_used"] == model.kv_stats()["pages_cached"] == 1


def test_a_new_context_reuses_the_cached_prefix_exactly(cold):
    model = load()
    with model.context() as first:
        first.feed(tokens(70))
    assert model.kv_stats()["pages_cached"] == 4
    ctx = model.context()
    used = model.kv_stats()["pages_used"]
    ctx.feed([*tokens(70)[:64], 1, 2, 3])
    stats = model.kv_stats()
    assert stats["prefix_hits"] == 1 and stats["prefix_misses"] == 1
    assert stats["pages_used"] == used + 1  # only the page after the cached 64 tokens
    assert ctx.pages[:4] == model.kv_cache.tree.match(tokens(64))
    assert np.array_equal(ctx.logits(), cold_logits(cold, [*tokens(64), 1, 2, 3]))
    check_holders(model, [ctx])


def test_a_cached_prefix_leaves_the_last_token_to_compute(cold):
    model = load()
    with model.context() as first:
        first.feed(tokens(32))
    ctx = model.context()
    ctx.feed(tokens(32))  # both pages cached, but the logits need the last token computed
    assert ctx.pages[0] == model.kv_cache.tree.match(tokens(16))[0]
    assert np.array_equal(ctx.logits(), cold_logits(cold, tokens(32)))
    check_holders(model, [ctx])


def test_cached_pages_are_evicted_least_recently_used_first_when_memory_runs_out():
    model = load(kv_memory=8 * 32768)  # eight pages of 16 tokens
    for start in (1, 2, 3):
        with model.context() as ctx:
            ctx.feed(tokens(40, start=start))  # two full pages cached each time
    assert model.kv_stats()["pages_cached"] == 6
    model.kv_cache.tree.match(tokens(40, start=1))  # now the most recently used
    ctx = model.context()
    ctx.feed(tokens(80, start=9))  # five pages: three cached pages must go
    assert model.kv_stats()["pages_cached"] == 3 + 5
    assert len(model.kv_cache.tree.match(tokens(40, start=1))) == 2
    assert model.kv_cache.tree.match(tokens(40, start=2)) == []
    check_holders(model, [ctx])


def test_a_kv_cache_full_of_live_pages_refuses_and_changes_nothing():
    model = load(kv_memory=4 * 32768)
    a = model.context()
    a.feed(tokens(50))
    with model.context() as b:
        before = model.kv_stats()
        with pytest.raises(ContextOverflow, match="KV cache is full"):
            b.feed(tokens(48) + list(range(1, 18)))
        assert b.n_tokens == 0 and b.pages == []
        assert model.kv_stats()["pages_used"] == before["pages_used"]
        check_holders(model, [a, b])


def test_a_rewind_with_no_room_to_copy_a_shared_page_changes_nothing(cold):
    model = load(kv_memory=3 * 32768)
    ctx = model.context()
    ctx.feed(tokens(40))  # all three pages
    fork = ctx.fork()  # shares them all: rewinding into page 1 must copy it
    with pytest.raises(ContextOverflow, match="KV cache is full"):
        ctx.rewind(20)
    assert ctx.tokens == tokens(40) and ctx.pages == fork.pages
    fork.close()  # now page 2 is ctx's alone, and freed by the rewind: room for the copy
    ctx.rewind(20)
    assert np.array_equal(ctx.logits(), cold_logits(cold, tokens(20)))
    check_holders(model, [ctx])


def test_without_the_prefix_cache_nothing_is_kept_or_reused():
    model = load(prefix_cache=False)
    with model.context() as first:
        first.feed(tokens(40))
    ctx = model.context()
    ctx.feed(tokens(40))
    stats = model.kv_stats()
    assert stats["pages_cached"] == stats["prefix_hits"] == stats["prefix_misses"] == 0
    assert stats["pages_used"] == 3
    check_holders(model, [ctx])
