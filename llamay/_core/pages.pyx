# cython: language_level=3, annotation_typing=False
"""The KV page arena: one 2 MiB-aligned allocation of fixed-size pages, with refcounts and a
free list in C memory.

The byte layout, the allocation order and the C-level (nogil) functions are documented in
csrc/pages.h. This module owns the memory and gives Python a checked API over those functions:
misuse (a double free, a stale or out-of-range id) raises instead of corrupting memory, and an
exhausted arena raises ContextOverflow.
"""

import operator

import numpy as np

from libc.stdint cimport int32_t, int64_t, INT32_MAX

from llamay.errors import ContextOverflow

cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* Asks for transparent huge pages: decode streams the KV pages, and 2 MiB pages spare
       the TLB. Advice only, so failure (or another OS) changes nothing but speed. */
    static void llamay_advise_hugepages(void *p, size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        madvise(p, n, MADV_HUGEPAGE);
    #else
        (void)p; (void)n;
    #endif
    }
    """
    void llamay_advise_hugepages(void *p, size_t n)

HUGE_PAGE = 2 << 20
PAGE_TOKENS = (16, 32, 64)
# Far above any real model, and low enough that no stride can overflow 64 bits.
MAX_DIM = 1 << 16
DTYPES = {"F16": np.float16, "F32": np.float32}


def page_nbytes(
    n_layers: int, n_kv_heads: int, head_dim: int, page_tokens: int, dtype: str
) -> int:
    """The bytes of one page: K and V of page_tokens positions for every layer and KV head."""
    cdef llamay_pages c
    _layout(&c, n_layers, n_kv_heads, head_dim, page_tokens, dtype)
    return c.page_bytes


cdef int _layout(
    llamay_pages *c, object n_layers, object n_kv_heads, object head_dim, object page_tokens,
    object dtype
) except -1:
    """Checks a page shape and fills in its dimensions and strides (see csrc/pages.h)."""
    n_layers, n_kv_heads, head_dim, page_tokens = map(
        operator.index, (n_layers, n_kv_heads, head_dim, page_tokens)
    )
    if not all(1 <= n <= MAX_DIM for n in (n_layers, n_kv_heads, head_dim)):
        raise ValueError(
            f"n_layers, n_kv_heads and head_dim must be between 1 and {MAX_DIM}, not "
            f"{n_layers}, {n_kv_heads} and {head_dim}"
        )
    if page_tokens not in PAGE_TOKENS:
        raise ValueError(f"page_tokens must be one of {PAGE_TOKENS}, not {page_tokens}")
    if dtype not in DTYPES:
        raise ValueError(f"the KV dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    c.n_layers = n_layers
    c.n_kv_heads = n_kv_heads
    c.head_dim = head_dim
    c.page_tokens = page_tokens
    c.elem_bytes = np.dtype(DTYPES[dtype]).itemsize
    c.row_bytes = <int64_t>head_dim * c.elem_bytes
    c.head_bytes = page_tokens * c.row_bytes
    c.kv_bytes = n_kv_heads * c.head_bytes
    c.layer_bytes = 2 * c.kv_bytes
    c.page_bytes = n_layers * c.layer_bytes
    return 0


cdef class PageArena:
    """n_pages pages of page_tokens positions x n_layers x n_kv_heads x head_dim, for K and V.

    Each page has a refcount: alloc() gives a page with refcount 1, incref()/decref() move it,
    and the page returns to the free list (zeroed) when it reaches 0.
    """

    def __cinit__(
        self,
        n_layers: int,
        n_kv_heads: int,
        head_dim: int,
        page_tokens: int,
        dtype: str,
        n_pages: int,
    ):
        n_pages = operator.index(n_pages)
        if not 1 <= n_pages <= INT32_MAX:
            raise ValueError(f"n_pages must be between 1 and {INT32_MAX}, not {n_pages}")
        cdef llamay_pages *c = &self.c
        _layout(c, n_layers, n_kv_heads, head_dim, page_tokens, dtype)
        c.n_pages = <int32_t>n_pages
        self.dtype = dtype

        # np.zeros of a large size maps fresh zero pages lazily, so an arena costs memory only
        # as its pages are first written; the padding lets the base move up to a 2 MiB boundary.
        cdef int64_t total = n_pages * c.page_bytes
        cdef int64_t rounded = (total + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE
        raw = np.zeros(rounded + HUGE_PAGE, dtype=np.uint8)
        cdef int64_t start = (-raw.ctypes.data) % HUGE_PAGE
        self.data = raw[start : start + total]
        c.base = &self.data[0]
        llamay_advise_hugepages(c.base, rounded)

        # The stack is filled so that a fresh arena hands out 0, 1, 2, ...
        self._refcounts = np.zeros(n_pages, dtype=np.int32)
        self._free_stack = np.arange(n_pages - 1, -1, -1, dtype=np.int32)
        c.refcounts = &self._refcounts[0]
        c.free_stack = &self._free_stack[0]
        c.n_free = c.n_pages

    @property
    def n_pages(self) -> int:
        return self.c.n_pages

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

    @property
    def page_bytes(self) -> int:
        return self.c.page_bytes

    @property
    def n_free(self) -> int:
        return self.c.n_free

    @property
    def n_used(self) -> int:
        return self.c.n_pages - self.c.n_free

    def alloc(self) -> int:
        """A free page, now with refcount 1; ContextOverflow when none is left."""
        cdef llamay_page_id page = llamay_pages_alloc(&self.c)
        if page == LLAMAY_PAGES_NONE_FREE:
            raise ContextOverflow(self._full_message(1))
        return page

    def alloc_many(self, n: int) -> np.ndarray:
        """n pages (int32, in allocation order), or ContextOverflow and none allocated."""
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of pages ({n})")
        if n > self.c.n_free:
            raise ContextOverflow(self._full_message(n))
        out = np.empty(n, dtype=np.int32)
        cdef llamay_page_id[::1] ids = out
        if n:
            llamay_pages_alloc_many(&self.c, n, &ids[0])
        return out

    def incref(self, page: int) -> int:
        """Adds a reference to an allocated page; returns its new refcount."""
        return _count_or_raise(llamay_pages_incref(&self.c, self._page_id(page)), page)

    def decref(self, page: int) -> int:
        """Drops a reference; at 0 the page is zeroed and freed. Returns the new refcount."""
        return _count_or_raise(llamay_pages_decref(&self.c, self._page_id(page)), page)

    def refcount(self, page: int) -> int:
        """The page's refcount: 0 for a free page."""
        return self.c.refcounts[self._page_id(page)]

    def copy_page(self, src: int, dst: int) -> None:
        """Copies every layer's K and V of page src over page dst (both allocated, distinct)."""
        cdef llamay_page_id s = self._page_id(src), d = self._page_id(dst)
        code = llamay_pages_copy(&self.c, s, d)
        if code == LLAMAY_PAGE_SAME:
            raise ValueError(f"copy_page: source and destination are the same page ({s})")
        if code == LLAMAY_PAGE_NOT_IN_USE:
            free = s if self.c.refcounts[s] == 0 else d
            raise ValueError(f"copy_page: page {free} is free; copy between allocated pages")

    def k_view(self, page: int, layer: int) -> np.ndarray:
        """One layer's K in a page, zero-copy and writable: (n_kv_heads, page_tokens, head_dim)."""
        return self._view(self._page_id(page), self._layer(layer), 0)

    def v_view(self, page: int, layer: int) -> np.ndarray:
        """One layer's V in a page, zero-copy and writable: (n_kv_heads, page_tokens, head_dim)."""
        return self._view(self._page_id(page), self._layer(layer), self.c.kv_bytes)

    cdef object _view(self, llamay_page_id page, int32_t layer, int64_t offset):
        if self.c.refcounts[page] == 0:
            raise ValueError(f"page {page} is free: allocate it before reading or writing it")
        cdef int64_t at = page * self.c.page_bytes + layer * self.c.layer_bytes + offset
        block = np.asarray(self.data[at : at + self.c.kv_bytes]).view(DTYPES[self.dtype])
        return block.reshape(self.c.n_kv_heads, self.c.page_tokens, self.c.head_dim)

    cdef llamay_page_id _page_id(self, object page) except -1:
        page = operator.index(page)
        if not 0 <= page < self.c.n_pages:
            raise IndexError(
                f"page {page} is out of range: this arena has pages 0..{self.c.n_pages - 1}"
            )
        return page

    cdef int32_t _layer(self, object layer) except -1:
        layer = operator.index(layer)
        if not 0 <= layer < self.c.n_layers:
            raise IndexError(
                f"layer {layer} is out of range: pages hold layers 0..{self.c.n_layers - 1}"
            )
        return layer

    cdef str _full_message(self, int64_t needed):
        mib = self.c.n_pages * self.c.page_bytes / 1048576.0
        return (
            f"the KV cache is full: {needed} page(s) of {self.c.page_tokens} tokens needed but "
            f"only {self.c.n_free} of {self.c.n_pages} are free ({mib:.1f} MiB in all); free a "
            "context or raise the KV memory budget"
        )


cdef int32_t _count_or_raise(int32_t code, object page) except -1:
    if code == LLAMAY_PAGE_NOT_IN_USE:
        raise ValueError(f"page {page} is free (a double free, or a stale page id)")
    return code
