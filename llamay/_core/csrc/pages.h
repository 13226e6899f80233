/* KV page memory: the byte layout of the CPU backend's pages and its accessors.
 *
 * A page holds the K and V rows of P consecutive positions (P = page_tokens, the attention
 * tile) for every layer and KV head. Its canonical bytes, what a snapshot holds of it
 * (llamay/state/layout.py) whatever the backend, are laid out as
 *
 *     page -> layer -> {K, V} -> kv_head -> token -> head_dim
 *
 *     row_bytes   = head_dim * elem_bytes            one token of one head
 *     head_bytes  = page_tokens * row_bytes          the P x head_dim block of one head
 *     page_bytes  = n_layers * 2 * n_kv_heads * head_bytes
 *
 * A row is head_dim elements of IEEE binary32 (F32) or binary16 (F16), little-endian, or
 * head_dim / 32 blocks of ggml's Q8_0 (a binary16 scale d, then 32 int8 q: x = q * d; 34 bytes),
 * so row_bytes = head_dim * 4, head_dim * 2 or head_dim / 32 * 34.
 *
 * In memory, pages go in groups of group_pages consecutive ids, and a group is laid out as
 *
 *     group -> layer -> kv_head -> page of the group -> {K, V} -> token -> head_dim
 *
 * so that one (layer, kv_head)'s blocks of a group's pages are one run of bytes: attention over
 * a context whose pages were taken in order reads runs of group_pages K and V blocks, where a
 * page per block put each block a page's size from the last, a fresh start for the hardware
 * prefetchers every 4 KB (bench/NOTES.md, "KV pages in groups"). pages.pyx picks
 * group_pages (runs of about 512 KiB, at most 64 pages, equal groups); group_bytes =
 * group_pages * page_bytes, 64 MiB for the 1B shape's F16 cache (1 MiB pages). Writing a page
 * makes its blocks resident on 4 KB pages; a group that fills moves onto 2 MiB pages, and then
 * the whole group is resident (pages.pyx, PageMemory.taking). The memory base is 2 MiB
 * aligned; every block is 64-byte aligned when head_bytes is a multiple of 64.
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
    int64_t row_bytes, head_bytes, page_bytes, group_bytes;
    int32_t n_pages, n_layers, n_kv_heads, head_dim, page_tokens, type; /* llamay_kv_type */
    int32_t group_pages;
} llamay_pages;

/* The page_tokens x head_dim K block of one (page, layer, kv_head). */
static inline unsigned char *llamay_page_k(const llamay_pages *a, llamay_page_id page,
                                           int32_t layer, int32_t head) {
    const int64_t group = page / a->group_pages, slot = page % a->group_pages;
    const int64_t run = (int64_t)layer * a->n_kv_heads + head;
    return a->base + group * a->group_bytes + (run * a->group_pages + slot) * 2 * a->head_bytes;
}

/* The matching V block: it follows the K block. */
static inline unsigned char *llamay_page_v(const llamay_pages *a, llamay_page_id page,
                                           int32_t layer, int32_t head) {
    return llamay_page_k(a, page, layer, head) + a->head_bytes;
}

#endif
