# KV pages for Cython code: `from llamay._core.pages cimport PageMemory, llamay_pages`.
# The byte layout is documented in csrc/pages.h; `memory.c` is the C struct that nogil code and
# the C kernels read pages through. The allocator (PageTable) knows ids and refcounts only.

from libc.stdint cimport int32_t, int64_t


cdef extern from "pages.h" nogil:
    ctypedef int32_t llamay_page_id

    ctypedef struct llamay_pages:
        unsigned char *base
        int64_t row_bytes, head_bytes, page_bytes, group_bytes
        int32_t n_pages, n_layers, n_kv_heads, head_dim, page_tokens, type, group_pages

    unsigned char *llamay_page_k(const llamay_pages *a, llamay_page_id page, int32_t layer,
                                 int32_t head)
    unsigned char *llamay_page_v(const llamay_pages *a, llamay_page_id page, int32_t layer,
                                 int32_t head)


cdef class PageMemory:
    cdef llamay_pages c
    # the 2 MiB-aligned page bytes that c.base points into
    cdef unsigned char[::1] data
    # the same bytes as (group, layer, kv_head, page of the group, K or V, token, row byte)
    cdef object blocks
    cdef readonly str dtype
    # which pages the state engine has ever taken, how many of each group, and which groups
    # are on 2 MiB pages (taking)
    cdef object ever_taken
    cdef object group_taken
    cdef object group_huge

    cdef llamay_page_id _page_id(self, object page) except -1
    cdef int32_t _layer(self, object layer) except -1
    cdef object _blocks_of(self, llamay_page_id page)
    cdef object _view(self, llamay_page_id page, int32_t layer, int kv)


cdef class PageTable:
    cdef int32_t[::1] _refcounts
    # free ids in [0, n_free); the top is _free_stack[n_free - 1]
    cdef llamay_page_id[::1] _free_stack
    cdef int32_t _n_free
    cdef readonly int32_t n_pages

    cdef llamay_page_id _page_id(self, object page) except -1
    cdef llamay_page_id _take(self)
    cdef int _check_used(self, llamay_page_id p) except -1
