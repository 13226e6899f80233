"""The page allocator (PageTable: accounting, refcounts, allocation order, misuse refused) and
the CPU backend's page memory (PageMemory: views over the documented byte layout, copies,
zeroing, canonical bytes, shapes refused)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from llamay._core.pages import HUGE_WASTE, MAX_GROUP_PAGES, RUN_BYTES, PageMemory, PageTable
from llamay.errors import ContextOverflow

from helpers.residency import huge_pages, linux_only, resident_bytes

HUGE_PAGE = 2 << 20
# Gemma 3 270M: 18 layers, 1 KV head, head_dim 256.
GEMMA = {"n_layers": 18, "n_kv_heads": 1, "head_dim": 256}


def small_memory(n_pages: int = 4, dtype: str = "F32", n_kv_heads: int = 2) -> PageMemory:
    return PageMemory(3, n_kv_heads, 8, 16, dtype, n_pages)


def fill(arena: PageMemory, page: int, seed: int) -> None:
    """Writes distinct random values into every layer's K and V of a page."""
    rng = np.random.default_rng(seed)
    for layer in range(arena.n_layers):
        for view in (arena.k_view(page, layer), arena.v_view(page, layer)):
            view[...] = rng.standard_normal(view.shape)


def contents(arena: PageMemory, page: int) -> list[np.ndarray]:
    return [
        view(page, layer).copy()
        for layer in range(arena.n_layers)
        for view in (arena.k_view, arena.v_view)
    ]


def assert_same_contents(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


# ---- allocation order and refcounts ----------------------------------------------------------


def test_fresh_arena_hands_out_lowest_ids_then_reuses_last_freed_first():
    arena = PageTable(5)
    assert [arena.alloc() for _ in range(3)] == [0, 1, 2]
    arena.decref(0)
    arena.decref(2)
    assert arena.alloc() == 2
    assert arena.alloc() == 0
    assert arena.alloc() == 3


def test_refcount_semantics():
    arena = PageTable(4)
    page = arena.alloc()
    assert arena.refcount(page) == 1
    assert arena.incref(page) == 2
    assert arena.incref(page) == 3
    assert arena.decref(page) == 2
    assert arena.decref(page) == 1
    assert (arena.n_used, arena.n_free) == (1, 3)
    assert arena.decref(page) == 0
    assert arena.refcount(page) == 0
    assert (arena.n_used, arena.n_free) == (0, 4)


def test_refcounts_of_many_pages_at_once():
    arena = PageTable(4)
    first, second = arena.alloc(), arena.alloc()
    arena.incref(second)
    ids = np.array([second, first, 3, second], dtype=np.int32)
    assert arena.refcounts(ids).tolist() == [2, 1, 0, 2]
    assert arena.refcounts(np.empty(0, dtype=np.int32)).tolist() == []
    for bad in ([4], [-1]):
        with pytest.raises(IndexError, match=r"page ids must be in 0\.\.3"):
            arena.refcounts(np.array(bad, dtype=np.int32))


def test_double_free_and_stale_ids_are_refused_without_changing_anything():
    arena = PageTable(4)
    page = arena.alloc()
    other = arena.alloc()
    arena.decref(page)
    with pytest.raises(ValueError, match=r"page 0 is free \(a double free"):
        arena.decref(page)
    with pytest.raises(ValueError, match="page 0 is free"):
        arena.incref(page)
    assert (arena.n_used, arena.n_free) == (1, 3)
    assert [arena.refcount(p) for p in range(4)] == [0, 1, 0, 0]
    # The refused free did not push page 0 twice: it comes back once, then fresh pages follow.
    assert [arena.alloc(), arena.alloc(), arena.alloc()] == [0, 2, 3]
    assert other == 1


@pytest.mark.parametrize("page", [-1, 4, 2**40])
def test_out_of_range_ids_are_refused(page):
    arena = PageTable(4)
    for call in (arena.incref, arena.decref, arena.refcount):
        with pytest.raises(IndexError, match=rf"page {page} is out of range: .* pages 0\.\.3"):
            call(page)
    memory = small_memory()
    for call in (memory.zero, memory.read, lambda p: memory.k_view(p, 0)):
        with pytest.raises(IndexError, match=rf"page {page} is out of range: .* pages 0\.\.3"):
            call(page)
    with pytest.raises(IndexError, match="out of range"):
        memory.copy(0, page)


def test_non_integer_ids_are_refused():
    arena = PageTable(4)
    arena.alloc()
    for bad in (0.0, 0.7, "0", None):
        with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
            arena.incref(bad)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        PageMemory(3.5, 1, 8, 16, "F32", 4)
    assert arena.incref(np.int32(0)) == 2


def test_out_of_pages_raises_context_overflow():
    arena = PageTable(2)
    arena.alloc()
    arena.alloc()
    with pytest.raises(ContextOverflow, match="no free page: all 2 are in use"):
        arena.alloc()
    assert (arena.n_used, arena.n_free) == (2, 0)


def test_alloc_many_is_all_or_nothing():
    arena = PageTable(6)
    arena.alloc_many(2)
    with pytest.raises(ContextOverflow, match=r"5 pages needed, 4 of 6 free"):
        arena.alloc_many(5)
    assert (arena.n_used, arena.n_free) == (2, 4)
    assert [arena.refcount(p) for p in range(6)] == [1, 1, 0, 0, 0, 0]
    pages = arena.alloc_many(4)
    assert pages.dtype == np.int32
    assert pages.tolist() == [2, 3, 4, 5]
    assert arena.alloc_many(0).tolist() == []
    with pytest.raises(ValueError, match="negative"):
        arena.alloc_many(-1)


class ArenaAgainstModel(RuleBasedStateMachine):
    """Random alloc/alloc_many/incref/decref against refcounts in a plain dict and the
    documented allocation order (a LIFO stack that starts with 0 on top)."""

    N_PAGES = 7

    def __init__(self) -> None:
        super().__init__()
        self.arena = PageTable(self.N_PAGES)
        self.refcounts = dict.fromkeys(range(self.N_PAGES), 0)
        self.free_stack = list(range(self.N_PAGES - 1, -1, -1))

    def used(self) -> list[int]:
        return sorted(p for p, count in self.refcounts.items() if count)

    def expect_alloc(self) -> int:
        page = self.free_stack.pop()
        self.refcounts[page] = 1
        return page

    @rule()
    def alloc(self):
        if self.free_stack:
            assert self.arena.alloc() == self.expect_alloc()
        else:
            with pytest.raises(ContextOverflow):
                self.arena.alloc()

    @rule(n=st.integers(0, N_PAGES + 1))
    def alloc_many(self, n):
        if n <= len(self.free_stack):
            expected = [self.expect_alloc() for _ in range(n)]
            assert self.arena.alloc_many(n).tolist() == expected
        else:
            with pytest.raises(ContextOverflow):
                self.arena.alloc_many(n)

    @precondition(lambda self: self.used())
    @rule(data=st.data())
    def incref(self, data):
        page = data.draw(st.sampled_from(self.used()))
        self.refcounts[page] += 1
        assert self.arena.incref(page) == self.refcounts[page]

    @precondition(lambda self: self.used())
    @rule(data=st.data())
    def decref(self, data):
        page = data.draw(st.sampled_from(self.used()))
        self.refcounts[page] -= 1
        if self.refcounts[page] == 0:
            self.free_stack.append(page)
        assert self.arena.decref(page) == self.refcounts[page]

    @rule(page=st.integers(0, N_PAGES - 1))
    def misuse_of_a_free_page_is_refused(self, page):
        if self.refcounts[page] == 0:
            with pytest.raises(ValueError, match="is free"):
                self.arena.decref(page)
            with pytest.raises(ValueError, match="is free"):
                self.arena.incref(page)

    @rule(data=st.data())
    def all_in_use(self, data):
        pages = data.draw(st.lists(st.integers(0, self.N_PAGES - 1), max_size=4))
        expected = all(self.refcounts[p] for p in pages)
        assert self.arena.all_in_use(np.asarray(pages, dtype=np.int32)) == expected

    @invariant()
    def accounting_matches(self):
        arena = self.arena
        assert arena.n_used + arena.n_free == self.N_PAGES
        assert arena.n_free == len(self.free_stack)
        assert [arena.refcount(p) for p in range(self.N_PAGES)] == [
            self.refcounts[p] for p in range(self.N_PAGES)
        ]


TestArenaAgainstModel = ArenaAgainstModel.TestCase
TestArenaAgainstModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


# ---- contents: views, copies, zeroing ---------------------------------------------------------


@pytest.mark.parametrize("dtype", ["F16", "F32"])
def test_views_are_zero_copy_and_write_through(dtype):
    arena = small_memory(dtype=dtype)
    page = 2
    k = arena.k_view(page, 1)
    assert k.shape == (2, 16, 8)
    assert k.dtype == {"F16": np.float16, "F32": np.float32}[dtype]
    # each KV head's block is one run; the heads' blocks lie apart (csrc/pages.h)
    assert all(block.flags.c_contiguous for block in k) and k.flags.writeable
    k[1, 5, :] = np.arange(8)
    assert arena.k_view(page, 1)[1, 5].tolist() == list(range(8))
    # Nothing else in the page moved: other rows, V of the same layer, K of other layers.
    assert np.count_nonzero(arena.k_view(page, 1)) == 7
    assert not np.any(arena.v_view(page, 1))
    assert not np.any(arena.k_view(page, 0)) and not np.any(arena.k_view(page, 2))


def test_views_keep_the_memory_alive():
    arena = small_memory()
    view = arena.k_view(0, 0)
    view[...] = 3.0
    del arena
    assert np.all(view == 3.0)


def test_views_of_bad_layers_are_refused():
    arena = small_memory()
    with pytest.raises(IndexError, match=r"layer 3 is out of range: pages hold layers 0\.\.2"):
        arena.k_view(0, 3)


@pytest.mark.parametrize("dtype", ["F16", "F32"])
def test_copy_page_copies_exactly_one_page_for_all_layers(dtype):
    arena = small_memory(dtype=dtype)
    src, dst, neighbour = 0, 1, 2
    fill(arena, src, seed=1)
    fill(arena, dst, seed=2)
    fill(arena, neighbour, seed=3)
    before_src, before_neighbour = contents(arena, src), contents(arena, neighbour)
    arena.copy(src, dst)
    assert_same_contents(contents(arena, dst), before_src)
    assert_same_contents(contents(arena, src), before_src)
    assert_same_contents(contents(arena, neighbour), before_neighbour)


def test_copy_refuses_itself():
    with pytest.raises(ValueError, match="same page"):
        small_memory().copy(1, 1)


def test_zero_clears_exactly_one_page():
    arena = small_memory()
    fill(arena, 1, seed=4)
    fill(arena, 2, seed=5)
    neighbour = contents(arena, 2)
    arena.zero(1)
    assert not any(np.any(block) for block in contents(arena, 1))
    assert_same_contents(contents(arena, 2), neighbour)


@pytest.mark.parametrize("dtype", ["F16", "F32"])
def test_read_and_write_canonical_bytes(dtype):
    """read gives layer -> {K, V} -> head -> token -> dim, little-endian; write takes it back."""
    arena = small_memory(dtype=dtype)
    fill(arena, 3, seed=6)
    raw = arena.read(3)
    assert len(raw) == arena.page_bytes
    element = np.dtype({"F16": np.float16, "F32": np.float32}[dtype]).newbyteorder("<")
    assert np.array_equal(
        np.frombuffer(raw, element),
        np.concatenate([block.reshape(-1) for block in contents(arena, 3)]),
    )
    arena.write(0, raw)
    assert_same_contents(contents(arena, 0), contents(arena, 3))
    with pytest.raises(ValueError, match=f"a page has {arena.page_bytes} bytes, not 3"):
        arena.write(0, b"abc")


# ---- byte layout ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_pages", "group_pages"),
    [
        (1, 1),
        (MAX_GROUP_PAGES, MAX_GROUP_PAGES),
        (MAX_GROUP_PAGES + 1, MAX_GROUP_PAGES // 2 + 1),  # two groups, not 64 and 1
        (2 * MAX_GROUP_PAGES + 3, 44),  # three groups, one slot of the last unused
    ],
)
def test_pages_split_into_equal_groups_of_at_most_64(n_pages, group_pages):
    arena = PageMemory(1, 1, 32, 16, "F16", n_pages)
    assert arena.group_pages == group_pages


def test_groups_of_large_blocks_hold_fewer_pages():
    """Gemma's 32 x 256 F16 blocks (16 KiB, K and V 32 KiB a page): runs of 512 KiB are 16
    pages, and 100 pages go in 7 equal groups of 15."""
    arena = PageMemory(1, 1, 256, 32, "F16", 100)
    assert RUN_BYTES == 512 << 10
    assert arena.group_pages == 15


@pytest.mark.parametrize("dtype", ["F16", "F32"])
def test_layout_matches_pages_h(dtype):
    """Groups of group_pages pages, each group layer -> kv_head -> page -> {K, V} -> token ->
    head_dim from a 2 MiB-aligned base: a (layer, KV head)'s blocks of a group's pages follow
    one another."""
    n_layers, n_kv_heads, head_dim, page_tokens = 3, 2, 8, 16
    elem = {"F16": 2, "F32": 4}[dtype]
    n_pages = 2 * MAX_GROUP_PAGES + 3
    arena = PageMemory(n_layers, n_kv_heads, head_dim, page_tokens, dtype, n_pages)
    group_pages = arena.group_pages
    base = arena.k_view(0, 0).ctypes.data
    assert base % HUGE_PAGE == 0
    row, head = head_dim * elem, page_tokens * head_dim * elem
    assert arena.page_bytes == n_layers * 2 * n_kv_heads * head
    group_bytes = group_pages * arena.page_bytes
    for page in range(n_pages):
        group, slot = divmod(page, group_pages)
        for layer in range(n_layers):
            k, v = arena.k_view(page, layer), arena.v_view(page, layer)
            for h in range(n_kv_heads):
                run = layer * n_kv_heads + h
                at = base + group * group_bytes + (run * group_pages + slot) * 2 * head
                assert k[h].ctypes.data == at
                assert v[h].ctypes.data == at + head
            assert k.strides == v.strides == (2 * group_pages * head, row, elem)


@pytest.mark.parametrize("dtype", ["F16", "Q8_0"])
def test_pages_of_different_groups_copy_zero_and_read_alike(dtype):
    """Copies across groups, zeroing and canonical bytes address each page's own blocks: every
    other page, in its group or another, keeps its contents."""
    n_pages = 2 * MAX_GROUP_PAGES
    arena = PageMemory(2, 3, 32, 16, dtype, n_pages)
    assert arena.group_pages == MAX_GROUP_PAGES
    rng = np.random.default_rng(8)
    for page in range(n_pages):
        for layer in range(2):
            for view in (arena.k_view(page, layer), arena.v_view(page, layer)):
                view[...] = (
                    rng.integers(0, 256, view.nbytes, dtype=np.uint8)
                    .view(view.dtype)
                    .reshape(view.shape)
                )
    before = [arena.read(page) for page in range(n_pages)]
    assert len(set(before)) == n_pages
    last = n_pages - 1
    arena.copy(1, last)  # group 0 over group 1
    arena.zero(MAX_GROUP_PAGES - 1)
    arena.write(0, before[MAX_GROUP_PAGES])
    expected = list(before)
    expected[last] = before[1]
    expected[MAX_GROUP_PAGES - 1] = bytes(arena.page_bytes)
    expected[0] = before[MAX_GROUP_PAGES]
    assert [arena.read(page) for page in range(n_pages)] == expected


def test_gemma_page_size_and_block_alignment():
    arena = PageMemory(**GEMMA, page_tokens=32, dtype="F16", n_pages=3)
    assert arena.page_bytes == 18 * 2 * 32 * 256 * 2
    assert PageMemory(**GEMMA, page_tokens=64, dtype="F32", n_pages=1).page_bytes == (
        18 * 2 * 64 * 256 * 4
    )
    for page in range(3):
        for layer in range(18):
            assert arena.k_view(page, layer).ctypes.data % 64 == 0
            assert arena.v_view(page, layer).ctypes.data % 64 == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "Q4_0"}, "the KV type must be one of F16, F32, Q8_0, not 'Q4_0'"),
        ({"n_pages": 0}, "n_pages must be between 1 and 2147483647, not 0"),
        ({"head_dim": 0}, "head_dim and page_tokens must be between 1 and 65536"),
        ({"n_layers": 1 << 17}, "must be between 1 and 65536"),
    ],
)
def test_bad_shapes_are_refused(kwargs, message):
    args = {**GEMMA, "page_tokens": 32, "dtype": "F16", "n_pages": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        PageMemory(**args)


# ---- residency: 4 KB pages until a group fills ------------------------------------------------

# the 1B shape's F16 cache: 1 MiB pages, groups of 64
ONE_B = {"n_layers": 16, "n_kv_heads": 8, "head_dim": 64, "page_tokens": 32, "dtype": "F16"}


def write_page(arena: PageMemory, page: int) -> None:
    arena.write(page, np.full(arena.page_bytes, 1, dtype=np.uint8).tobytes())


@linux_only
def test_a_page_taken_makes_only_its_own_blocks_resident():
    """A short context's pages cost their own bytes, not their group's 64 MiB."""
    arena = PageMemory(n_pages=2 * MAX_GROUP_PAGES, **ONE_B)
    assert arena.group_pages == MAX_GROUP_PAGES and arena.page_bytes == 1 << 20
    arena.taking([0, 1, 2])
    for page in range(3):
        write_page(arena, page)
    assert 3 * arena.page_bytes <= resident_bytes(arena, 0) <= 4 * arena.page_bytes
    assert resident_bytes(arena, 1) == 0


def taken_and_written(arena: PageMemory, pages: range) -> None:
    arena.taking(pages)
    for page in pages:
        fill(arena, page, seed=page)


@linux_only
@huge_pages
@pytest.mark.parametrize("before", [0, 3, 42], ids=["in one go", "a few first", "one short"])
def test_a_first_group_goes_onto_huge_pages_two_thirds_taken(before):
    """A group moves onto 2 MiB pages once its slots not yet taken are at most half the pages
    taken in all: for the first of 64, at 43. Then one page written makes it all resident, and
    the pages written before (on 4 KB pages, now copied) keep their bytes."""
    assert HUGE_WASTE == 0.5
    arena = PageMemory(n_pages=3 * MAX_GROUP_PAGES, **ONE_B)
    taken_and_written(arena, range(before))
    kept = [contents(arena, page) for page in range(before)]
    if before == 42:
        assert resident_bytes(arena, 0) <= 43 * arena.page_bytes
    arena.taking(range(before, 43))
    write_page(arena, 42)
    assert resident_bytes(arena, 0) == MAX_GROUP_PAGES * arena.page_bytes
    assert resident_bytes(arena, 1) == 0
    for page in range(before):
        assert_same_contents(contents(arena, page), kept[page])


@linux_only
@huge_pages
def test_later_groups_go_onto_huge_pages_sooner():
    """After a full group of 64, the next moves at 22 of its pages taken ((64 - 22) <= (64 +
    22) / 2); after two full groups, the third moves at its first page."""
    arena = PageMemory(n_pages=3 * MAX_GROUP_PAGES, **ONE_B)
    taken_and_written(arena, range(MAX_GROUP_PAGES + 21))
    assert resident_bytes(arena, 1) <= 22 * arena.page_bytes
    taken_and_written(arena, range(MAX_GROUP_PAGES + 21, 2 * MAX_GROUP_PAGES + 1))
    assert resident_bytes(arena, 1) == MAX_GROUP_PAGES * arena.page_bytes
    assert resident_bytes(arena, 2) == MAX_GROUP_PAGES * arena.page_bytes


@linux_only
def test_pages_taken_again_count_once():
    """Pages freed and taken again are already resident: they do not count again."""
    arena = PageMemory(n_pages=2 * MAX_GROUP_PAGES, **ONE_B)
    for _ in range(20):
        arena.taking(range(10))
    write_page(arena, 9)
    assert resident_bytes(arena, 0) <= 2 * arena.page_bytes


def test_taking_refuses_pages_out_of_range():
    arena = small_memory(n_pages=4)
    with pytest.raises(IndexError, match=r"0\.\.3"):
        arena.taking([1, 4])
    arena.taking([])  # nothing taken is nothing to do
