# cython: language_level=3, annotation_typing=False
"""KV pages: the CPU backend's page memory, and the page allocator the state engine uses.

`PageMemory` is one 2 MiB-aligned allocation of fixed-size pages, in groups (csrc/pages.h)
that the forward step reads and writes by page id; it offers the page operations every backend
offers (copy, zero, read and write a page as its canonical bytes).

`PageTable` is the allocator: a refcount per page and a LIFO stack of free ids, in typed
memoryviews. A fresh table hands out 0, 1, 2, ...; afterwards the most recently freed page
comes back first (it is the one most likely still in cache). The order depends only on the
sequence of calls, never on addresses or time. It knows nothing of memory: the state engine
zeroes a page in its backend's memory when the last reference goes (llamay/state/kv_cache.py).
Misuse (a double free, a stale or out-of-range id) raises instead of corrupting anything, and an
exhausted table raises ContextOverflow.
"""

import operator
import sys

import numpy as np

from libc.stdint cimport INT32_MAX, int32_t, int64_t

from llamay.errors import ContextOverflow

cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    #if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(MADV_COLLAPSE)
    #define MADV_COLLAPSE 25
    #endif
    /* Page memory starts on 4 KB pages, so that writing a page makes only its own blocks
       resident; llamay_advise_hugepages moves a group to 2 MiB pages (pages.pyx, taking).
       Advice only, so failure (an older kernel, THP off, another OS) changes nothing but
       speed and memory. */
    static void llamay_advise_small_pages(void *p, size_t n) {
    #if defined(__linux__) && defined(MADV_NOHUGEPAGE)
        madvise(p, n, MADV_NOHUGEPAGE);
    #else
        (void)p; (void)n;
    #endif
    }
    /* collapse: move what is already resident onto 2 MiB pages now (Linux 6.1's
       MADV_COLLAPSE, a copy), instead of whenever khugepaged gets to it */
    static void llamay_advise_hugepages(void *p, size_t n, int collapse) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (madvise(p, n, MADV_HUGEPAGE) == 0 && collapse) {
            madvise(p, n, MADV_COLLAPSE);
        }
    #else
        (void)p; (void)n; (void)collapse;
    #endif
    }
    """
    void llamay_advise_small_pages(void *p, size_t n)
    void llamay_advise_hugepages(void *p, size_t n, int collapse)

HUGE_PAGE = 2 << 20
# A group of pages (csrc/pages.h) makes each (layer, KV head)'s K and V blocks of its pages one
# run of bytes, of about RUN_BYTES: runs that long read faster at depth, where a group is
# resident from the first write to any page of it once on 2 MiB pages (bench/NOTES.md, "KV pages
# in groups").
RUN_BYTES = 512 << 10
MAX_GROUP_PAGES = 64
# Page memory starts on 4 KB pages, so that a short context keeps only its own pages resident;
# a group moves onto 2 MiB pages, for long runs read without 4 KB TLB misses, once its slots not
# yet taken are at most HUGE_WASTE times the pages taken in all: a first group at two thirds
# taken, a third once two are full at its first page (bench/NOTES.md, "KV groups onto huge pages
# as they fill").
HUGE_WASTE = 0.5
# The KV element types (csrc/pages.h): their enum value, and the bytes of a row of head_dim
# elements. Q8_0 is ggml's block: 32 int8 values and their binary16 scale, 34 bytes.
KV_TYPES = {"F16": 1, "F32": 0, "Q8_0": 2}
Q8_0_BLOCK = 32
# The element of each floating-point KV type, as it lies in memory on this machine (pages are
# little-endian when read out); Q8_0 has blocks, not elements.
FLOAT_KV_ELEMENTS = {"F16": np.dtype(np.float16), "F32": np.dtype(np.float32)}


def kv_row_bytes(str dtype, head_dim) -> int:
    """Bytes of one K or V row of head_dim elements of a KV type; ValueError for a type or a
    head_dim it cannot hold."""
    if dtype not in KV_TYPES:
        raise ValueError(f"the KV type must be one of {', '.join(KV_TYPES)}, not {dtype!r}")
    head_dim = operator.index(head_dim)
    if dtype in FLOAT_KV_ELEMENTS:
        return FLOAT_KV_ELEMENTS[dtype].itemsize * head_dim
    if head_dim % Q8_0_BLOCK:
        raise ValueError(
            f"a Q8_0 KV cache needs a head size that is a multiple of {Q8_0_BLOCK}, and this "
            f"model's is {head_dim}: use the F16 KV type"
        )
    return head_dim // Q8_0_BLOCK * 34


# Far above any real model, and low enough that no stride can overflow 64 bits.
MAX_DIM = 1 << 16


cdef class PageMemory:
    """n_pages pages of page_tokens positions x n_layers x n_kv_heads x head_dim, for K and V.

    Fresh memory is zeros. The caller keeps track of which pages hold what; every id here is
    only checked to be in range.
    """

    def __cinit__(self, n_layers, n_kv_heads, head_dim, page_tokens, str dtype, n_pages):
        n_layers, n_kv_heads, head_dim, page_tokens, n_pages = map(
            operator.index, (n_layers, n_kv_heads, head_dim, page_tokens, n_pages)
        )
        if not all(1 <= n <= MAX_DIM for n in (n_layers, n_kv_heads, head_dim, page_tokens)):
            raise ValueError(
                f"n_layers, n_kv_heads, head_dim and page_tokens must be between 1 and {MAX_DIM}"
            )
        if not 1 <= n_pages <= INT32_MAX:
            raise ValueError(f"n_pages must be between 1 and {INT32_MAX}, not {n_pages}")
        cdef int64_t row_bytes = kv_row_bytes(dtype, head_dim)
        if sys.byteorder == "big" and dtype == "Q8_0":
            raise ValueError("a Q8_0 KV cache needs a little-endian machine")
        cdef llamay_pages *c = &self.c
        c.n_layers = n_layers
        c.n_kv_heads = n_kv_heads
        c.head_dim = head_dim
        c.page_tokens = page_tokens
        c.n_pages = n_pages
        c.type = KV_TYPES[dtype]
        c.row_bytes = row_bytes
        c.head_bytes = page_tokens * c.row_bytes
        c.page_bytes = n_layers * 2 * n_kv_heads * c.head_bytes
        # equal groups, so the last one is not mostly slots past n_pages (fewer than n_groups)
        cdef int64_t most = min(MAX_GROUP_PAGES, max(1, RUN_BYTES // (2 * c.head_bytes)))
        cdef int64_t n_groups = (n_pages + most - 1) // most
        c.group_pages = (n_pages + n_groups - 1) // n_groups
        c.group_bytes = c.group_pages * c.page_bytes
        self.dtype = dtype

        # np.zeros of a large size maps fresh zero pages lazily, so memory is taken only as
        # pages are first written; the padding lets the base move up to a 2 MiB boundary.
        cdef int64_t total = n_groups * c.group_bytes
        cdef int64_t rounded = (total + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE
        raw = np.zeros(rounded + HUGE_PAGE, dtype=np.uint8)
        cdef int64_t start = (-raw.ctypes.data) % HUGE_PAGE
        self.data = raw[start : start + total]
        c.base = &self.data[0]
        llamay_advise_small_pages(c.base, rounded)
        # which pages have ever been taken, how many of each group, and which groups are on
        # 2 MiB pages (taking)
        self.ever_taken = np.zeros(n_pages, dtype=np.bool_)
        self.group_taken = np.zeros(n_groups, dtype=np.int64)
        self.group_huge = np.zeros(n_groups, dtype=np.bool_)
        self.blocks = np.asarray(self.data).reshape(
            n_groups, n_layers, n_kv_heads, c.group_pages, 2, page_tokens, row_bytes
        )

    @property
    def n_pages(self) -> int:
        return self.c.n_pages

    @property
    def page_bytes(self) -> int:
        return self.c.page_bytes

    @property
    def group_pages(self) -> int:
        """Pages in each group of the memory layout (csrc/pages.h)."""
        return self.c.group_pages

    @property
    def n_layers(self) -> int:
        return self.c.n_layers

    @property
    def n_kv_heads(self) -> int:
        return self.c.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.c.head_dim

    @property
    def page_tokens(self) -> int:
        return self.c.page_tokens

    def taking(self, pages) -> None:
        """Advice that the state engine has taken these pages, to be written. A group goes
        onto 2 MiB pages (its resident pages moved there) once the pages of it not yet taken
        are at most HUGE_WASTE times the pages taken in all: KV memory stays within
        1 + HUGE_WASTE times what was ever taken. Where pages live changes no byte of them."""
        ids = np.unique(np.asarray(pages, dtype=np.int64).reshape(-1))
        if len(ids) and not (0 <= ids[0] and ids[-1] < self.c.n_pages):
            raise IndexError(f"pages must be in 0..{self.c.n_pages - 1}")
        fresh = ids[~self.ever_taken[ids]]
        self.ever_taken[fresh] = True
        had_pages = self.group_taken > 0
        self.group_taken += np.bincount(
            fresh // self.c.group_pages, minlength=len(self.group_taken)
        )
        going = (
            ~self.group_huge
            & (self.group_taken > 0)
            & (self.c.group_pages - self.group_taken <= HUGE_WASTE * self.group_taken.sum())
        )
        self.group_huge |= going
        cdef int64_t start, end
        for group, collapse in zip(np.flatnonzero(going).tolist(), had_pages[going].tolist()):
            # madvise takes whole 4 KB pages; a group's edges share them with its neighbours
            start = group * self.c.group_bytes // 4096 * 4096
            end = min((group + 1) * self.c.group_bytes, self.data.shape[0])
            llamay_advise_hugepages(self.c.base + start, end - start, collapse)

    def copy(self, src, dst) -> None:
        """Copies every layer's K and V of page src over page dst (copy-on-write)."""
        cdef llamay_page_id s = self._page_id(src), d = self._page_id(dst)
        if s == d:
            raise ValueError(f"copy: source and destination are the same page ({s})")
        self._blocks_of(d)[...] = self._blocks_of(s)

    def zero(self, page) -> None:
        self._blocks_of(self._page_id(page))[...] = 0

    def read(self, page) -> bytes:
        """The page's canonical bytes (csrc/pages.h): little-endian, layer by layer, K then V."""
        # (layer, kv_head, K or V, ...) in memory; canonically K or V comes before the KV head
        raw = self._blocks_of(self._page_id(page)).transpose(0, 2, 1, 3, 4).reshape(-1)
        if sys.byteorder == "big":  # F16 or F32 (Q8_0 refuses big-endian machines)
            element = FLOAT_KV_ELEMENTS[self.dtype]
            raw = raw.view(element).astype(element.newbyteorder("<"))
        return raw.tobytes()

    def write(self, page, raw) -> None:
        """Overwrites a page with canonical bytes, as read() returns them."""
        cdef llamay_page_id p = self._page_id(page)
        values = np.frombuffer(raw, dtype=np.uint8)
        if values.shape[0] != self.c.page_bytes:
            raise ValueError(f"a page has {self.c.page_bytes} bytes, not {values.shape[0]}")
        if sys.byteorder == "big":
            element = FLOAT_KV_ELEMENTS[self.dtype]
            values = values.view(element.newbyteorder("<")).astype(element).view(np.uint8)
        canonical = values.reshape(
            self.c.n_layers, 2, self.c.n_kv_heads, self.c.page_tokens, self.c.row_bytes
        )
        self._blocks_of(p)[...] = canonical.transpose(0, 2, 1, 3, 4)

    def k_view(self, page, layer) -> np.ndarray:
        """One layer's K in a page, zero-copy and writable: (n_kv_heads, page_tokens, head_dim)
        values for F16 and F32, (n_kv_heads, page_tokens, row_bytes) bytes for Q8_0; the KV
        heads' blocks are not adjacent (csrc/pages.h), each block is."""
        return self._view(self._page_id(page), self._layer(layer), 0)

    def v_view(self, page, layer) -> np.ndarray:
        """One layer's V in a page, zero-copy and writable, shaped as k_view."""
        return self._view(self._page_id(page), self._layer(layer), 1)

    cdef object _blocks_of(self, llamay_page_id page):
        """The page's blocks in memory: (layer, kv_head, K or V, token, row byte)."""
        return self.blocks[page // self.c.group_pages, :, :, page % self.c.group_pages]

    cdef object _view(self, llamay_page_id page, int32_t layer, int kv):
        block = self._blocks_of(page)[layer, :, kv]
        if self.dtype == "Q8_0":
            return block
        return block.view(FLOAT_KV_ELEMENTS[self.dtype])

    cdef llamay_page_id _page_id(self, object page) except -1:
        page = operator.index(page)
        if not 0 <= page < self.c.n_pages:
            raise IndexError(f"page {page} is out of range: there are pages 0..{self.c.n_pages - 1}")
        return page

    cdef int32_t _layer(self, object layer) except -1:
        layer = operator.index(layer)
        if not 0 <= layer < self.c.n_layers:
            raise IndexError(
                f"layer {layer} is out of range: pages hold layers 0..{self.c.n_layers - 1}"
            )
        return layer


cdef class PageTable:
    """The refcounts of n_pages page ids and their free list (see the module docstring)."""

    def __cinit__(self, n_pages):
        n_pages = operator.index(n_pages)
        if not 1 <= n_pages <= INT32_MAX:
            raise ValueError(f"n_pages must be between 1 and {INT32_MAX}, not {n_pages}")
        self.n_pages = n_pages
        self._refcounts = np.zeros(n_pages, dtype=np.int32)
        # filled so that a fresh table hands out 0, 1, 2, ...
        self._free_stack = np.arange(n_pages - 1, -1, -1, dtype=np.int32)
        self._n_free = n_pages

    @property
    def n_free(self) -> int:
        return self._n_free

    @property
    def n_used(self) -> int:
        return self.n_pages - self._n_free

    def alloc(self) -> int:
        """A free page, now with refcount 1; ContextOverflow when none is left."""
        if self._n_free == 0:
            raise ContextOverflow(f"no free page: all {self.n_pages} are in use")
        return self._take()

    def alloc_many(self, n) -> np.ndarray:
        """n pages (int32, in allocation order), or ContextOverflow and none allocated."""
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of pages ({n})")
        if n > self._n_free:
            raise ContextOverflow(f"{n} pages needed, {self._n_free} of {self.n_pages} free")
        out = np.empty(n, dtype=np.int32)
        cdef llamay_page_id[::1] ids = out
        cdef Py_ssize_t i
        for i in range(n):
            ids[i] = self._take()
        return out

    cdef llamay_page_id _take(self):
        self._n_free -= 1
        cdef llamay_page_id page = self._free_stack[self._n_free]
        self._refcounts[page] = 1
        return page

    def incref(self, page) -> int:
        """Adds a reference to an allocated page; returns its new refcount."""
        cdef llamay_page_id p = self._page_id(page)
        self._check_used(p)
        self._refcounts[p] += 1
        return self._refcounts[p]

    def decref(self, page) -> int:
        """Drops a reference; at 0 the page is free again. Returns the new refcount."""
        cdef llamay_page_id p = self._page_id(page)
        self._check_used(p)
        self._refcounts[p] -= 1
        if self._refcounts[p] == 0:
            self._free_stack[self._n_free] = p
            self._n_free += 1
        return self._refcounts[p]

    def refcount(self, page) -> int:
        """The page's refcount: 0 for a free page."""
        return self._refcounts[self._page_id(page)]

    def refcounts(self, const int32_t[::1] pages) -> np.ndarray:
        """The refcount of each page id of pages (int32; 0 for a free page)."""
        ids = np.asarray(pages)
        if ids.size and not (0 <= ids.min() and ids.max() < self.n_pages):
            raise IndexError(f"page ids must be in 0..{self.n_pages - 1}")
        return np.asarray(self._refcounts)[ids]

    def all_in_use(self, const int32_t[::1] pages) -> bool:
        """Whether every id of pages is an allocated page."""
        cdef Py_ssize_t i
        for i in range(pages.shape[0]):
            if not (0 <= pages[i] < self.n_pages and self._refcounts[pages[i]] > 0):
                return False
        return True

    cdef int _check_used(self, llamay_page_id p) except -1:
        if self._refcounts[p] == 0:
            raise ValueError(f"page {p} is free (a double free, or a stale page id)")
        return 0

    cdef llamay_page_id _page_id(self, object page) except -1:
        page = operator.index(page)
        if not 0 <= page < self.n_pages:
            raise IndexError(f"page {page} is out of range: there are pages 0..{self.n_pages - 1}")
        return page
