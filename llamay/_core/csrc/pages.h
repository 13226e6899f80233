/* KV page memory: the byte layout of the CPU backend's pages and its accessors.
 *
 * A page holds the K and V rows of P consecutive positions (P = page_tokens, the attention
 * tile) for every layer and KV head, laid out as
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
 * A row is head_dim elements of IEEE binary32 (F32) or binary16 (F16), little-endian, or
 * head_dim / 32 blocks of ggml's Q8_0 (a binary16 scale d, then 32 int8 q: x = q * d; 34 bytes),
 * so row_bytes = head_dim * 4, head_dim * 2 or head_dim / 32 * 34. This is also the byte layout
 * of a page in a snapshot (llamay/state/layout.py), whatever the backend. The memory base
 * is 2 MiB aligned; every block is 64-byte aligned when head_bytes is a multiple of 64.
 *
 * Which pages are in use, and who holds them, is not known here: refcounts and the free list
 * are the state engine's (llamay/state), and the kernels only read and write pages by id.
 */
#ifndef LLAMAY_PAGES_H
#define LLAMAY_PAGES_H

#include <stdint.h>

typedef int32_t llamay_page_id;

/* The element type of the rows; the values are the page memory's, csrc and pages.pyx agree. */
enum llamay_kv_type { LLAMAY_KV_F32 = 0, LLAMAY_KV_F16 = 1, LLAMAY_KV_Q8_0 = 2 };

typedef struct llamay_pages {
    unsigned char *base;
    int64_t row_bytes, head_bytes, kv_bytes, layer_bytes, page_bytes;
    int32_t n_pages, n_layers, n_kv_heads, head_dim, page_tokens, type; /* llamay_kv_type */
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

#endif
