"""The KV cache's verbs and accounting, the KV layout and budgets, and the page storage every
backend offers (the same canonical bytes from the CPU backend's memory and the reference
backend's arrays)."""

from __future__ import annotations

import numpy as np
import pytest

from llamay._core.pages import PageMemory
from llamay.backends.reference import NumpyPages
from llamay.errors import ContextOverflow, LlamayError
from llamay.state import KVCache, KVLayout, PageList, parse_size

from helpers.residency import huge_pages, linux_only, resident_bytes

# Gemma 3 270M: 18 layers, 1 KV head, head_dim 256.
GEMMA = KVLayout(n_layers=18, n_kv_heads=1, head_dim=256, page_tokens=32, dtype="F16")
SMALL = KVLayout(n_layers=3, n_kv_heads=2, head_dim=16, page_tokens=16, dtype="F32")


def cpu_storage(layout: KVLayout, n_pages: int) -> PageMemory:
    return PageMemory(
        layout.n_layers,
        layout.n_kv_heads,
        layout.head_dim,
        layout.page_tokens,
        layout.dtype,
        n_pages,
    )


STORAGES = {"cpu": cpu_storage, "reference": NumpyPages}


def cache(layout: KVLayout = SMALL, n_pages: int = 6, storage: str = "cpu") -> KVCache:
    return KVCache(layout, n_pages, STORAGES[storage](layout, n_pages))


def random_page(layout: KVLayout, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    dtype = {"F16": np.float16, "F32": np.float32}[layout.dtype]
    count = layout.page_bytes // np.dtype(dtype).itemsize
    return rng.standard_normal(count).astype(np.dtype(dtype).newbyteorder("<")).tobytes()


# ---- layout and budgets -------------------------------------------------------------------------


def test_layout_page_bytes_and_budgets():
    assert GEMMA.page_bytes == 18 * 2 * 32 * 256 * 2
    assert KVLayout(18, 1, 256, 64, "F32").page_bytes == 18 * 2 * 64 * 256 * 4
    assert GEMMA.n_pages_for(10 * GEMMA.page_bytes + GEMMA.page_bytes - 1) == 10
    with pytest.raises(ValueError, match=r"budget of 1000 bytes holds no page: .* 589824 bytes"):
        GEMMA.n_pages_for(1000)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"page_tokens": 24}, r"page_tokens must be one of \(16, 32, 64\), not 24"),
        ({"page_tokens": 128}, "page_tokens must be one of"),
        ({"dtype": "Q4_0"}, "the KV type must be one of F16, F32, Q8_0, not 'Q4_0'"),
        ({"head_dim": 0}, "n_layers, n_kv_heads and head_dim must be between 1 and 65536"),
        ({"n_layers": 1 << 17}, "must be between 1 and 65536, not 131072, 1 and 256"),
    ],
)
def test_bad_layouts_are_refused(kwargs, message):
    args = {"n_layers": 18, "n_kv_heads": 1, "head_dim": 256, **kwargs}
    with pytest.raises(ValueError, match=message):
        KVLayout(**args)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2GiB", 2 << 30),
        ("512MB", 512_000_000),
        ("1.5 KiB", 1536),
        ("100b", 100),
        (" 3 mib ", 3 << 20),
        ("2GB", 2_000_000_000),
        ("7KB", 7000),
        ("0.0001KB", 0),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["2", "GiB", "2TB", "-1MB", "1e3MB", "2 G", "", "1.2.3MB"])
def test_parse_size_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError, match=r"as a size: .* \(units: B, KB, MB, GB, KiB, MiB, GiB\)"):
        parse_size(text)


# ---- storage: one canonical page format for every backend --------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", ["F16", "F32"])
def test_storage_round_trips_canonical_bytes(storage, dtype):
    layout = KVLayout(3, 2, 16, 16, dtype)
    pages = STORAGES[storage](layout, 4)
    raw = random_page(layout, seed=1)
    pages.write(2, raw)
    assert pages.read(2) == raw
    assert pages.read(1) == bytes(layout.page_bytes)  # fresh memory is zeros
    pages.copy(2, 3)
    assert pages.read(3) == raw
    pages.zero(2)
    assert pages.read(2) == bytes(layout.page_bytes)
    assert pages.read(3) == raw
    with pytest.raises(ValueError, match="same page"):
        pages.copy(3, 3)
    with pytest.raises(ValueError, match=f"a page has {layout.page_bytes} bytes"):
        pages.write(0, raw[:-1])


def test_the_backends_lay_pages_out_alike():
    """A K row written through the CPU memory's views sits where the canonical layout (and the
    reference backend's array) puts it."""
    memory = cpu_storage(SMALL, 2)
    memory.k_view(1, 2)[1, 5] = np.arange(16)
    memory.v_view(1, 0)[0, 0] = -1.0
    reference = NumpyPages(SMALL, 2)
    reference.write(1, memory.read(1))
    assert reference.array[1, 2, 0, 1, 5].tolist() == list(range(16))
    assert (reference.array[1, 0, 1, 0, 0] == -1.0).all()
    assert np.count_nonzero(reference.array) == 15 + 16  # arange(16) holds one zero
    blocks = SMALL.positions(memory.read(1), 6)
    assert blocks.shape == (3 * 2 * 2, 6, 16)
    assert blocks[2 * 2 * 2 + 1, 5].tolist() == list(range(16))


# ---- the cache's verbs ----------------------------------------------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
def test_a_page_whose_last_holder_lets_go_comes_back_zeroed(storage):
    kv = cache(storage=storage)
    pages = PageList(4)
    kv.reserve([(pages, 0, 20)])  # two pages
    page = int(pages.ids[0])
    kv.storage.write(page, random_page(SMALL, seed=2))
    kv.incref(page)
    kv.decref(page)
    assert kv.storage.read(page) != bytes(SMALL.page_bytes)  # still held: untouched
    kv.release(pages.cut(0))
    assert kv.stats()["pages_used"] == 0
    assert kv.storage.read(page) == bytes(SMALL.page_bytes)


def test_reserve_is_all_or_nothing_and_names_the_budget():
    kv = cache(GEMMA, n_pages=2)
    first, second = PageList(4), PageList(4)
    with pytest.raises(ContextOverflow) as caught:
        kv.reserve([(first, 0, 32), (second, 0, 33)])  # one page, then two
    assert str(caught.value) == (
        "the KV cache is full: 3 page(s) of 32 tokens needed but only 2 of 2 are free "
        "(1.1 MiB in all); free a context or raise the KV memory budget"
    )
    assert isinstance(caught.value, LlamayError)
    assert (len(first), len(second), kv.stats()["pages_used"]) == (0, 0, 0)
    kv.reserve([(first, 0, 32), (second, 0, 32)])
    assert (first.ids.tolist(), second.ids.tolist()) == ([0], [1])


def test_reserve_copies_a_shared_partial_page_before_it_is_written():
    kv = cache()
    parent, child = PageList(4), PageList(4)
    kv.reserve([(parent, 0, 20)])  # a full page and a partial one
    raw = random_page(SMALL, seed=3)
    kv.storage.write(int(parent.ids[1]), raw)
    kv.share(parent, child)
    assert kv.refcount(int(parent.ids[1])) == 2
    kv.reserve([(child, 20, 1)])  # the next write lands in the shared partial page
    assert child.ids[0] == parent.ids[0] and child.ids[1] != parent.ids[1]
    assert kv.storage.read(int(child.ids[1])) == raw
    assert kv.refcount(int(parent.ids[1])) == kv.refcount(int(child.ids[1])) == 1
    assert kv.refcount(int(parent.ids[0])) == 2  # full pages stay shared
    kv.reserve([(parent, 32, 1)])  # a full shared page is never written: a new page instead
    assert kv.stats()["pages_used"] == 4


def test_stats_and_the_prefix_tree():
    kv = cache()
    pages = PageList(4)
    tokens = list(range(40))
    kv.reserve([(pages, 0, 40)])
    kv.commit(tokens, pages)
    assert kv.stats() == {
        "page_tokens": 16,
        "pages_total": 6,
        "pages_used": 3,
        "pages_free": 3,
        "bytes_per_page": SMALL.page_bytes,
        "dtype": "F32",
        "pages_cached": 2,
        "prefix_hits": 0,
        "prefix_misses": 0,
    }
    adopter = PageList(4)
    assert kv.adopt_prefix(adopter, [*tokens[:35], 999]) == 32
    assert adopter.ids.tolist() == pages.ids[:2].tolist()
    kv.release(pages.cut(0))
    kv.release(adopter.cut(0))
    assert kv.stats()["pages_used"] == 2  # the tree still holds its two
    assert kv.evict(5) == 2
    assert kv.stats()["pages_used"] == 0


@linux_only
@huge_pages
def test_pages_taken_are_told_to_the_storage():
    """reserve tells the CPU backend's memory which pages it took: 43 of a group of 64 taken
    for one sequence move the group onto huge pages (tests/core/test_pages.py), so one page
    written makes all 64 resident."""
    layout = KVLayout(n_layers=16, n_kv_heads=8, head_dim=64, page_tokens=32, dtype="F16")
    kv = cache(layout, n_pages=128)
    assert kv.storage.group_pages == 64
    pages = PageList(128)
    kv.reserve([(pages, 0, 43 * layout.page_tokens)])
    kv.storage.write(int(pages.ids[-1]), random_page(layout, seed=0))
    assert resident_bytes(kv.storage, 0) == 64 * layout.page_bytes
    assert resident_bytes(kv.storage, 1) == 0
