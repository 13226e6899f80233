/* The ggml block formats. Field order is byte layout (as in ggml-common.h): a block is read
   straight out of a GGUF file, so each struct's size is asserted to be the format's. */
#ifndef LLAMAY_BLOCKS_H
#define LLAMAY_BLOCKS_H

#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF blocks are little-endian; llamay reads them in place and needs a little-endian CPU"
#endif

typedef uint16_t ggml_half; /* IEEE binary16, as raw bits */

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK4_NL 32
#define QK_MXFP4 32
#define QK_NVFP4 64
#define QK_NVFP4_SUB 16
#define QK1_0 128
#define QK_K 256
#define K_SCALE_SIZE 12

/* ---- plain numbers, as blocks of one element (so that every type has a block_<name>) ---- */

typedef float block_f32;
typedef ggml_half block_f16;
typedef uint16_t block_bf16; /* the high half of an fp32 */
typedef int8_t block_i8;
typedef int16_t block_i16;
typedef int32_t block_i32;
typedef int64_t block_i64;
typedef double block_f64;

/* ---- 32-element formats: one scale (and maybe a min) per block ---- */

typedef struct {
    ggml_half d;          /* scale */
    uint8_t qs[QK4_0 / 2]; /* element j in the low nibble of qs[j], element j+16 in the high */
} block_q4_0;

typedef struct {
    ggml_half d; /* scale */
    ggml_half m; /* min */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct {
    ggml_half d;
    uint8_t qh[4]; /* fifth bit of element j: bit j of this little-endian uint32 */
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct {
    ggml_half d;
    ggml_half m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

typedef struct {
    ggml_half d;
    int8_t qs[QK8_0];
} block_q8_0;

typedef struct {
    ggml_half d;
    uint8_t qs[QK4_NL / 2]; /* indices into kvalues_iq4nl, nibbles as in Q4_0 */
} block_iq4_nl;

typedef struct {
    uint8_t e; /* E8M0 shared exponent */
    uint8_t qs[QK_MXFP4 / 2]; /* indices into kvalues_mxfp4, nibbles as in Q4_0 */
} block_mxfp4;

typedef struct {
    uint8_t d[QK_NVFP4 / QK_NVFP4_SUB]; /* UE4M3 scale of each 16-element sub-block */
    uint8_t qs[QK_NVFP4 / 2];           /* 8 bytes per sub-block, nibbles as in Q4_0 */
} block_nvfp4;

typedef struct {
    ggml_half d;
    uint8_t qs[QK1_0 / 8]; /* bit j set: +d, clear: -d */
} block_q1_0;

/* ---- 256-element super-blocks ---- */

typedef struct {
    uint8_t scales[QK_K / 16]; /* 4-bit scale (low) and min (high) of each 16 elements */
    uint8_t qs[QK_K / 4];
    ggml_half d;
    ggml_half dmin;
} block_q2_K;

typedef struct {
    uint8_t hmask[QK_K / 8]; /* third bit, inverted: set means no -4 */
    uint8_t qs[QK_K / 4];
    uint8_t scales[12]; /* sixteen 6-bit scales */
    ggml_half d;
} block_q3_K;

typedef struct {
    ggml_half d;
    ggml_half dmin;
    uint8_t scales[K_SCALE_SIZE]; /* eight 6-bit scales and eight 6-bit mins */
    uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct {
    ggml_half d;
    ggml_half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct {
    uint8_t ql[QK_K / 2]; /* low 4 bits */
    uint8_t qh[QK_K / 4]; /* high 2 bits */
    int8_t scales[QK_K / 16];
    ggml_half d;
} block_q6_K;

typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of each 16 qs, for the K-quants' min terms */
} block_q8_K;

typedef struct {
    ggml_half d;
    /* per 32 elements: 4 grid indices (bytes), then 4 x 7 sign bits and a 4-bit scale */
    uint16_t qs[QK_K / 8];
} block_iq2_xxs;

typedef struct {
    ggml_half d;
    uint16_t qs[QK_K / 8]; /* 9-bit grid index, 7-bit sign index */
    uint8_t scales[QK_K / 32];
} block_iq2_xs;

typedef struct {
    ggml_half d;
    uint8_t qs[QK_K / 4]; /* 32 low bytes of grid indices, then 32 bytes of signs */
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
} block_iq2_s;

typedef struct {
    ggml_half d;
    /* 64 grid indices, then per 32 elements 4 x 7 sign bits and a 4-bit scale */
    uint8_t qs[3 * QK_K / 8];
} block_iq3_xxs;

typedef struct {
    ggml_half d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t signs[QK_K / 8];
    uint8_t scales[QK_K / 64];
} block_iq3_s;

typedef struct {
    ggml_half d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

typedef struct {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; /* 5 ternary digits per byte */
    uint8_t qh[QK_K / 64];                  /* 4 ternary digits per byte */
    ggml_half d;
} block_tq1_0;

typedef struct {
    uint8_t qs[QK_K / 4]; /* 2 bits per element, value - 1 */
    ggml_half d;
} block_tq2_0;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 size");
_Static_assert(sizeof(block_nvfp4) == 36, "block_nvfp4 size");
_Static_assert(sizeof(block_q1_0) == 18, "block_q1_0 size");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");
_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs size");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs size");
_Static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s size");
_Static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs size");
_Static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s size");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");
_Static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0 size");
_Static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0 size");

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (of 8), packed in the block's 12 bytes of
   scales q (as ggml's get_scale_min_k4) */
static inline void llamay_q4_K_scale_min(const uint8_t *q, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#endif
