/* The KV page arena: byte layout, accessors and the page allocator.
 *
 * One arena per model holds n_pages pages. A page holds the K and V rows of P consecutive
 * positions (P = page_tokens, the attention tile) for every layer and KV head, laid out as
 *
 *     page -> layer -> {K, V} -> kv_head -> token -> head_dim
 *
 * so attention over one (layer, kv_head) reads a contiguous P x head_dim block per page, and a
 * page (everything copy-on-write and snapshots touch) is one contiguous run of bytes:
 *
 *     row_bytes   = head_dim * elem_bytes            one token of one head
 *     head_bytes  = page_tokens * row_bytes          the P x head_dim block of one head
 *     kv_bytes    = n_kv_heads * head_bytes          K (or V) of one layer
 *     layer_bytes = 2 * kv_bytes                     K then V
 *     page_bytes  = n_layers * layer_bytes
 *
 * Elements are IEEE binary32 (F32) or binary16 (F16), little-endian. The arena base is 2 MiB
 * aligned; every block is 64-byte aligned when head_bytes is a multiple of 64 (any even head_dim).
 *
 * Allocator: a refcount per page (0 = free) and a LIFO stack of free page ids. A fresh arena
 * hands out 0, 1, 2, ...; afterwards the most recently freed page comes back first (it is the
 * one most likely still in cache). The order depends only on the sequence of calls, never on
 * addresses or time. A page is zeroed when its last reference goes, so every free page holds
 * zeros and a page comes out of alloc zeroed: its unwritten slots never carry another context's
 * KV into a snapshot.
 *
 * The functions validate page ids and return a negative LLAMAY_PAGE_* code rather than touch
 * memory out of bounds; they take no locks (the caller serialises).
 */
#ifndef LLAMAY_PAGES_H
#define LLAMAY_PAGES_H

#include <stdint.h>
#include <string.h>

typedef int32_t llamay_page_id;

enum {
    LLAMAY_PAGES_NONE_FREE = -1,   /* alloc: every page is in use */
    LLAMAY_PAGE_OUT_OF_RANGE = -2, /* an id outside [0, n_pages) */
    LLAMAY_PAGE_NOT_IN_USE = -3,   /* a free page used as if allocated (double free, stale id) */
    LLAMAY_PAGE_SAME = -4,         /* copy of a page onto itself */
};

typedef struct llamay_pages {
    unsigned char *base;
    int64_t row_bytes, head_bytes, kv_bytes, layer_bytes, page_bytes;
    int32_t n_pages, n_layers, n_kv_heads, head_dim, page_tokens, elem_bytes;
    int32_t *refcounts;          /* n_pages entries; 0 means free */
    llamay_page_id *free_stack;  /* free ids in [0, n_free); the top is free_stack[n_free - 1] */
    int32_t n_free;
} llamay_pages;

/* The page_tokens x head_dim K block of one (page, layer, kv_head). */
static inline unsigned char *llamay_page_k(const llamay_pages *a, llamay_page_id page,
                                           int32_t layer, int32_t head) {
    return a->base + page * a->page_bytes + layer * a->layer_bytes + head * a->head_bytes;
}

/* The matching V block: it follows all K heads of the layer. */
static inline unsigned char *llamay_page_v(const llamay_pages *a, llamay_page_id page,
                                           int32_t layer, int32_t head) {
    return llamay_page_k(a, page, layer, head) + a->kv_bytes;
}

static inline int llamay_page_in_use(const llamay_pages *a, llamay_page_id page) {
    return page >= 0 && page < a->n_pages && a->refcounts[page] > 0;
}

/* The error code for a page that is not in use: out of range or free. */
static inline int32_t llamay_page_error(const llamay_pages *a, llamay_page_id page) {
    return (page < 0 || page >= a->n_pages) ? LLAMAY_PAGE_OUT_OF_RANGE : LLAMAY_PAGE_NOT_IN_USE;
}

/* A free page with refcount 1, or LLAMAY_PAGES_NONE_FREE. */
static inline llamay_page_id llamay_pages_alloc(llamay_pages *a) {
    if (a->n_free == 0) return LLAMAY_PAGES_NONE_FREE;
    llamay_page_id page = a->free_stack[--a->n_free];
    a->refcounts[page] = 1;
    return page;
}

/* n pages into out, or none at all: 0, or LLAMAY_PAGES_NONE_FREE with nothing allocated. */
static inline int llamay_pages_alloc_many(llamay_pages *a, int32_t n, llamay_page_id *out) {
    if (n < 0 || n > a->n_free) return LLAMAY_PAGES_NONE_FREE;
    for (int32_t i = 0; i < n; i++) out[i] = llamay_pages_alloc(a);
    return 0;
}

/* The new refcount of an allocated page, or a negative code. */
static inline int32_t llamay_pages_incref(llamay_pages *a, llamay_page_id page) {
    if (!llamay_page_in_use(a, page)) return llamay_page_error(a, page);
    return ++a->refcounts[page];
}

/* The new refcount; at 0 the page is zeroed and freed. A negative code for a page not in use. */
static inline int32_t llamay_pages_decref(llamay_pages *a, llamay_page_id page) {
    if (!llamay_page_in_use(a, page)) return llamay_page_error(a, page);
    int32_t count = --a->refcounts[page];
    if (count == 0) {
        memset(a->base + page * a->page_bytes, 0, (size_t)a->page_bytes);
        a->free_stack[a->n_free++] = page;
    }
    return count;
}

/* Copies every layer's K and V of src over dst (copy-on-write); 0 or a negative code. */
static inline int llamay_pages_copy(llamay_pages *a, llamay_page_id src, llamay_page_id dst) {
    if (!llamay_page_in_use(a, src)) return llamay_page_error(a, src);
    if (!llamay_page_in_use(a, dst)) return llamay_page_error(a, dst);
    if (src == dst) return LLAMAY_PAGE_SAME;
    memcpy(a->base + dst * a->page_bytes, a->base + src * a->page_bytes, (size_t)a->page_bytes);
    return 0;
}

#endif
