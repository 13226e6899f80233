/* Shared by the matmul kernel sets: the byte layouts of quantized activations and packed
   weights, the pieces of the canonical order (matmul.h states it), scale unpacking that must
   agree bit for bit, and the per-set kernel tables. */
#ifndef LLAMAY_MATMUL_KERNELS_H
#define LLAMAY_MATMUL_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "matmul.h"
#include "prefetch.h"
#include "quants.h"

/* ---- quantized activation rows ----
   A row holds the quants, then the block scales as fp32, then the block sums, each section
   64-byte aligned. The quants are contiguous (one 64-byte load covers two Q8_0 blocks), in
   element order, or for Q8_0_X8 interleaved like the packed weights (below), with the row
   padded to whole groups of eight blocks (zeros). */

#define LLAMAY_ACT_ALIGN 64

static inline size_t llamay_align64(size_t n) {
    return (n + (LLAMAY_ACT_ALIGN - 1)) & ~(size_t)(LLAMAY_ACT_ALIGN - 1);
}

/* elements per scale and per sum of each activation kind */
static inline int llamay_act_scale_elems(int kind) { return kind == LLAMAY_ACT_Q8_K ? 256 : 32; }
static inline int llamay_act_sum_elems(int kind) { return kind == LLAMAY_ACT_Q8_K ? 16 : 32; }

/* elements a row holds: n_cols, or whole groups of eight blocks for Q8_0_X8 */
static inline size_t llamay_act_padded_cols(int kind, int n_cols) {
    return kind == LLAMAY_ACT_Q8_0_X8 ? ((size_t)n_cols + 255) / 256 * 256 : (size_t)n_cols;
}

static inline size_t llamay_act_scales_offset(int kind, int n_cols) {
    return llamay_align64(llamay_act_padded_cols(kind, n_cols));
}

static inline size_t llamay_act_sums_offset(int kind, int n_cols) {
    const size_t n_scales = llamay_act_padded_cols(kind, n_cols) / llamay_act_scale_elems(kind);
    return llamay_act_scales_offset(kind, n_cols) + llamay_align64(n_scales * sizeof(float));
}

static inline size_t llamay_act_row_bytes(int kind, int n_cols) {
    if (kind == LLAMAY_ACT_F32) {
        return llamay_align64((size_t)n_cols * sizeof(float));
    }
    const size_t n_sums = llamay_act_padded_cols(kind, n_cols) / llamay_act_sum_elems(kind);
    return llamay_act_sums_offset(kind, n_cols) + llamay_align64(n_sums * sizeof(int16_t));
}

typedef struct {
    const int8_t *qs;   /* the quants */
    const float *d;     /* one scale per 32 (Q8_0) or 256 (Q8_K) elements */
    const int16_t *sum; /* sum of the quants of each 32 (Q8_0) or 16 (Q8_K) elements */
} llamay_act_q;

static inline llamay_act_q llamay_act_q_row(const uint8_t *row, int kind, int n_cols) {
    llamay_act_q a;
    a.qs = (const int8_t *)row;
    a.d = (const float *)(row + llamay_act_scales_offset(kind, n_cols));
    a.sum = (const int16_t *)(row + llamay_act_sums_offset(kind, n_cols));
    return a;
}

/* token t's quantized activations for weight w */
static inline llamay_act_q llamay_act_q_of(const llamay_weight *w, const uint8_t *act, int t) {
    return llamay_act_q_row(act + (size_t)t * w->act_row_bytes, w->act_kind, w->n_cols);
}

/* Where element i of block j lies among the interleaved quants of a group of n blocks: in
   chunk i / 4 (4n bytes), at bytes 4j..4j+3, so that 32-bit lane j of a chunk is block j. The
   packed weights and the Q8_0_X8 activations (whose groups are all whole: n = 8, 32-byte
   chunks) share this order. */
static inline int llamay_x8_position(int j, int i, int n) {
    return 4 * n * (i / 4) + 4 * j + i % 4;
}

/* ---- packed weights of the 32-element formats ----
   A row is its blocks in groups of eight, the last group holding the rest (1 to 8 blocks), so
   that a packed row takes exactly the bytes of the GGUF row. A group of n blocks holds:
   - quants: Q8_0's 32n bytes in the interleaved order above; or, for the 4- and 5-bit
     formats, 16n bytes of nibbles: the low nibbles of the 8n bytes from 8nh are chunks 4h
     and 4h+1, one after the other, their high nibbles chunks 4h+2 and 4h+3;
   - Q5_0/Q5_1: 4n bytes of fifth bits, bit p for the quant at position p;
   - the blocks' scales: n fp16, or MXFP4's n E8M0 bytes;
   - Q4_1/Q5_1: the blocks' mins, n fp16.
   With n = 8, a 64-byte vector of quants (at 64k) holds chunks 2k and 2k+1, whose lane j and
   j + 8 are block j; a smaller group's vector is those two chunks' 8n bytes, expanded.
   The packed types are those whose matmul column in ggml_types.h is Q32. */

static inline int llamay_packed_has_fifth_bits(int type) {
    return type == LLAMAY_TYPE_Q5_0 || type == LLAMAY_TYPE_Q5_1;
}

static inline int llamay_packed_has_mins(int type) {
    return type == LLAMAY_TYPE_Q4_1 || type == LLAMAY_TYPE_Q5_1;
}

/* offsets within a group of n blocks */
static inline int llamay_packed_fifth_bits_offset(int type, int n) {
    return (type == LLAMAY_TYPE_Q8_0 ? 32 : 16) * n;
}

static inline int llamay_packed_scales_offset(int type, int n) {
    const int fifth_bits = llamay_packed_has_fifth_bits(type) ? 4 * n : 0;
    return llamay_packed_fifth_bits_offset(type, n) + fifth_bits;
}

static inline int llamay_packed_mins_offset(int type, int n) {
    return llamay_packed_scales_offset(type, n) + (type == LLAMAY_TYPE_MXFP4 ? n : 2 * n);
}

static inline int llamay_packed_group_bytes(int type, int n) {
    return llamay_packed_mins_offset(type, n) + (llamay_packed_has_mins(type) ? 2 * n : 0);
}

/* blocks in group g of a row of n_blocks */
static inline int llamay_group_blocks(int n_blocks, int g) {
    return n_blocks - 8 * g < 8 ? n_blocks - 8 * g : 8;
}

/* bits [first, first + count) of p, count <= 56 (a partial group's fifth bits) */
static inline uint64_t llamay_read_bits(const uint8_t *p, int first, int count) {
    uint64_t v = 0;
    for (int b = (first + count + 7) / 8 - 1; b >= first / 8; b--) {
        v = v << 8 | p[b];
    }
    return (v >> (first % 8)) & ((1ull << count) - 1);
}

/* ---- packed weights of the K-quants: eight rows interleaved (KX8) ----
   The SIMD kernels of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS read a copy in which every group
   of eight rows is stored super-block by super-block, the eight rows' blocks interleaved, so
   that a 32-bit SIMD lane holds one row: a dot product accumulates the eight rows side by side,
   with no horizontal sum per super-block, and the fp32 steps run with the rows as lanes. The
   integers and the fp32 operations are the reference's (matmul.h); only where the bytes lie
   changes.

   A group of eight rows is n_blocks super-blocks of kx8_block_bytes each; row r of the matrix
   is lane r % 8 of group r / 8 (the last group's missing rows are zeros). Per super-block:
   Q4_K (1184 bytes: the 8 x 144 of the file, scales and mins unpacked to bytes):
      0  d[8], dmin[8]          fp16, one per row
     32  scales: pair p = 0..3 (sub-blocks 2p, 2p+1): 16 bytes, row r at 2r: [sc_2p, sc_2p+1]
     96  mins: the same layout
    160  quants: chunk c = 0..31 (elements 8c..8c+7): 32 bytes, row r at 4r..4r+3, byte i
         holding element 8c+i in its low nibble and element 8c+4+i in its high nibble
   Q5_K (1440 bytes: the 8 x 176 of the file, scales and mins unpacked): Q4_K's 1184, then
   1184  the fifth bits: sub-block j = 0..7 (chunks 4j..4j+3): 32 bytes, row r at 4r..4r+3,
         byte i holding the fifth bit of element 8(4j + k) + i at bit k and of element
         8(4j + k) + 4 + i at bit 4 + k, for k = 0..3 (each one 16-bit shift from bit 4, where
         it joins its nibble)
   Q6_K (1680 bytes, as the file's 8 x 210):
      0  d[8]                   fp16
     16  scales: pair p = 0..7 (16-element sub-blocks 2p, 2p+1): 16 bytes, row r at 2r
    144  the low four bits of the quants: chunks as Q4_K's
   1168  the high two bits: chunk pair m = 0..15 (chunks 2m, 2m+1): 32 bytes, row r at
         4r..4r+3, byte i holding the high bits of element 8(2m + s/2) + i + 4(s%2) at bits
         4, 6, 0, 2 for s = 0, 1, 2, 3 (so that each is at most one shift from bits 4-5, where
         it joins its low four bits)
   Q3_K (912 bytes: the 8 x 110 of the file, its 6-bit scales unpacked to bytes):
      0  d[8]                   fp16
     16  scales: as Q6_K's, each minus 32 (signed)
    144  the low two bits: chunk pair m = 0..15 (chunks 2m, 2m+1): 32 bytes, row r at
         4r..4r+3, byte i holding at bits 2s, 2s+1 (s = 0..3) element 8(2m + s/2) + 4(s%2) + i
    656  the third bits (the file's hmask: set means no -4): chunk quad o = 0..7 (chunks
         4o..4o+3): 32 bytes, row r at 4r..4r+3, byte i holding at bit k (k = 0..7) that of
         element 8(4o + k/2) + 4(k%2) + i (each one 16-bit shift from bit 2, where it joins
         its two low bits)
   Q2_K (672 bytes, as the file's 8 x 84):
      0  d[8], dmin[8]          fp16
     32  scales and mins: pair p = 0..7 (16-element sub-blocks 2p, 2p+1): 16 bytes, row r at
         2r: the file's two bytes (scale in the low nibble, min in the high one)
    160  the two-bit codes: as Q3_K's low two bits
   IQ4_XS (1104 bytes: the 8 x 136 of the file, its 6-bit scales unpacked to bytes):
      0  d[8]                   fp16
     16  scales: pair p = 0..3 (sub-blocks 2p, 2p+1): 16 bytes, row r at 2r, each minus 32
     80  the four-bit indices into kvalues_iq4nl: chunks as Q4_K's quants */

#define LLAMAY_KX8_ROWS 8

static inline int llamay_is_kx8_type(int type) {
    return type == LLAMAY_TYPE_Q2_K || type == LLAMAY_TYPE_Q3_K || type == LLAMAY_TYPE_Q4_K ||
           type == LLAMAY_TYPE_Q5_K || type == LLAMAY_TYPE_Q6_K || type == LLAMAY_TYPE_IQ4_XS;
}

/* bytes of one super-block of a group of eight rows */
static inline int llamay_kx8_block_bytes(int type) {
    switch (type) {
    case LLAMAY_TYPE_Q2_K: return 672;
    case LLAMAY_TYPE_Q3_K: return 912;
    case LLAMAY_TYPE_Q4_K: return 1184;
    case LLAMAY_TYPE_Q5_K: return 1440;
    case LLAMAY_TYPE_IQ4_XS: return 1104;
    default: return 1680; /* Q6_K */
    }
}

enum {
    LLAMAY_KX8_Q4_K_SCALES = 32,
    LLAMAY_KX8_Q4_K_MINS = 96,
    LLAMAY_KX8_Q4_K_QUANTS = 160,
    LLAMAY_KX8_Q5_K_FIFTH = 1184, /* and the rest as Q4_K's */
    LLAMAY_KX8_Q6_K_SCALES = 16,
    LLAMAY_KX8_Q6_K_LOW = 144,
    LLAMAY_KX8_Q6_K_HIGH = 1168,
    LLAMAY_KX8_Q3_K_SCALES = 16,
    LLAMAY_KX8_Q3_K_LOW = 144,
    LLAMAY_KX8_Q3_K_HIGH = 656,
    LLAMAY_KX8_Q2_K_SCALES = 32,
    LLAMAY_KX8_Q2_K_CODES = 160,
    LLAMAY_KX8_IQ4_XS_SCALES = 16,
    LLAMAY_KX8_IQ4_XS_QUANTS = 80,
};
/* matmul_kx8.h reads the signed scales of all three at Q6_K's offset */
_Static_assert(LLAMAY_KX8_Q3_K_SCALES == LLAMAY_KX8_Q6_K_SCALES &&
                   LLAMAY_KX8_IQ4_XS_SCALES == LLAMAY_KX8_Q6_K_SCALES,
               "Q3_K's and IQ4_XS's KX8 scales lie where Q6_K's do");

/* the super-block b of the group holding row r */
static inline const uint8_t *llamay_kx8_block(const llamay_weight *w, int r, int b) {
    const int n_blocks = w->n_cols / 256;
    const size_t group = (size_t)(r / LLAMAY_KX8_ROWS) * (size_t)n_blocks;
    return w->packed + (group + (size_t)b) * (size_t)llamay_kx8_block_bytes(w->type);
}

/* ---- the canonical order ---- */

#define LLAMAY_QUANT_LANES 8  /* accumulators of the integer kernels: block b -> lane b % 8 */
#define LLAMAY_FLOAT_LANES 16 /* accumulators of the fp32 kernels: element i -> lane i % 16 */

/* ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)): what halving a SIMD register twice computes */
static inline float llamay_tree8(const float acc[8]) {
    const float s0 = acc[0] + acc[4], s1 = acc[1] + acc[5];
    const float s2 = acc[2] + acc[6], s3 = acc[3] + acc[7];
    return (s0 + s2) + (s1 + s3);
}

static inline float llamay_tree16(const float acc[16]) {
    float half[8];
    for (int i = 0; i < 8; i++) {
        half[i] = acc[i] + acc[i + 8];
    }
    return llamay_tree8(half);
}

/* E8M0 exponent to fp32, halved (MXFP4's kvalues are doubled): as ggml_e8m0_to_fp32_half */
static inline float llamay_e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}

/* Q3_K: the sixteen signed scales from their 12-byte packing */
static inline void llamay_q3_K_scales(const uint8_t *q, int scales[16]) {
    for (int j = 0; j < 16; j++) {
        const int low = j < 8 ? q[j] & 0xF : q[j - 8] >> 4;
        const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        scales[j] = (low | (high << 4)) - 32;
    }
}

/* IQ4_XS: the signed scale of sub-block ib */
static inline int llamay_iq4_xs_scale(uint16_t scales_h, const uint8_t *scales_l, int ib) {
    const int low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int high = (scales_h >> (2 * ib)) & 3;
    return (low | (high << 4)) - 32;
}

/* ---- writing results ----
   out is token-major, so a tile of a few rows writes a few floats into each token's row, far
   apart. Kernels gather the results of LLAMAY_ROW_BLOCK rows for a chunk of tokens first,
   then write each token's row segment whole. */

#define LLAMAY_ROW_BLOCK 16
/* A matrix too big for the caches (the output projection of a large vocabulary), multiplied
   by a few tokens (a decode step of a batch of sequences), is read a row at a time, each row
   reused from L1 by every token: the tiled path, better for matrices that stay in cache,
   stalls on it. Both paths give the same bits. */
#define LLAMAY_DECODE_TOKENS 16
#define LLAMAY_STREAMED_BYTES ((size_t)16 << 20)

static inline int llamay_streams_rows(const llamay_weight *w, int n_tokens) {
    const size_t row_bytes = w->packed ? w->packed_row_bytes : w->row_bytes;
    return n_tokens == 1 ||
           (n_tokens <= LLAMAY_DECODE_TOKENS && (size_t)w->n_rows * row_bytes >= LLAMAY_STREAMED_BYTES);
}

static inline void llamay_store_results(float *out, size_t out_stride, int t0, int n_tok, int r0,
                                        int n_rows, const float (*results)[LLAMAY_ROW_BLOCK]) {
    for (int t = 0; t < n_tok; t++) {
        float *row = out + (size_t)(t0 + t) * out_stride + r0;
        __builtin_memcpy(row, results[t], (size_t)n_rows * sizeof(float));
    }
}

/* ---- kernel tables: the kernel of a set for a weight type, or NULL ---- */

llamay_matmul_fn llamay_reference_kernel(int type);
llamay_matmul_fn llamay_avx2_kernel(int type);
llamay_matmul_fn llamay_avx512_kernel(int type);
llamay_matmul_fn llamay_neon_kernel(int type);
/* NEON's two builds of its kernels (matmul_neon.c): without the dot product instructions (any
   AArch64 CPU) and with them; llamay_neon_kernel is the second where the CPU has them. */
llamay_matmul_fn llamay_neon_plain_kernel(int type);
llamay_matmul_fn llamay_neon_dotprod_kernel(int type);

#endif
