# The KV page arena for Cython code: `from llamay._core.pages cimport PageArena, llamay_page_k`.
# The layout and the allocator are documented in csrc/pages.h; `arena.c` is the C struct that
# nogil code passes to the accessors and to C kernels.

from libc.stdint cimport int32_t, int64_t


cdef extern from "pages.h" nogil:
    ctypedef int32_t llamay_page_id

    enum:
        LLAMAY_PAGES_NONE_FREE
        LLAMAY_PAGE_OUT_OF_RANGE
        LLAMAY_PAGE_NOT_IN_USE
        LLAMAY_PAGE_SAME

    ctypedef struct llamay_pages:
        unsigned char *base
        int64_t row_bytes, head_bytes, kv_bytes, layer_bytes, page_bytes
        int32_t n_pages, n_layers, n_kv_heads, head_dim, page_tokens, elem_bytes
        int32_t *refcounts
        llamay_page_id *free_stack
        int32_t n_free

    unsigned char *llamay_page_k(const llamay_pages *a, llamay_page_id page, int32_t layer,
                                 int32_t head)
    unsigned char *llamay_page_v(const llamay_pages *a, llamay_page_id page, int32_t layer,
                                 int32_t head)
    llamay_page_id llamay_pages_alloc(llamay_pages *a)
    int llamay_pages_alloc_many(llamay_pages *a, int32_t n, llamay_page_id *out)
    int32_t llamay_pages_incref(llamay_pages *a, llamay_page_id page)
    int32_t llamay_pages_decref(llamay_pages *a, llamay_page_id page)
    int llamay_pages_copy(llamay_pages *a, llamay_page_id src, llamay_page_id dst)


cdef class PageArena:
    cdef llamay_pages c
    # The memory c points into: the 2 MiB-aligned page bytes, the refcounts, the free stack.
    cdef unsigned char[::1] data
    cdef int32_t[::1] _refcounts
    cdef llamay_page_id[::1] _free_stack
    cdef readonly str dtype

    cdef object _view(self, llamay_page_id page, int32_t layer, int64_t offset)
    cdef llamay_page_id _page_id(self, object page) except -1
    cdef int32_t _layer(self, object layer) except -1
    cdef str _full_message(self, int64_t needed)
