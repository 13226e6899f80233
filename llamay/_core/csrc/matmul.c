/* Matmul entry points: which kernel and activation format a weight type takes (from its row
   of ggml_types.h), activation quantization, and the parallel wrapper for tests and benchmarks.
   The kernels live in matmul_ref.c (the definition of every result), matmul_avx2.c,
   matmul_avx512.c and matmul_neon.c (whose tiling drivers are matmul_driver.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "barrier.h"
#include "blocks.h"
#include "fp16.h"
#include "matmul.h"
#include "matmul_kernels.h"
#include "quants.h"

/* The activations a weight type takes, by its matmul family (ggml_types.h). */
static int act_kind_of(const llamay_quant_type *q) {
    switch (q->matmul) {
    case LLAMAY_MATMUL_Q32: return LLAMAY_ACT_Q8_0;
    case LLAMAY_MATMUL_K: return LLAMAY_ACT_Q8_K;
    default: return LLAMAY_ACT_F32;
    }
}

static llamay_matmul_fn simd_kernel(int set, int type) {
    switch (set) {
    case LLAMAY_KERNELS_AVX2: return llamay_avx2_kernel(type);
    case LLAMAY_KERNELS_AVX512: return llamay_avx512_kernel(type);
    case LLAMAY_KERNELS_NEON: return llamay_neon_kernel(type);
    default: return NULL;
    }
}

int llamay_kernel_set_available(int set) { return llamay_kernel_set_runs(set); }

int llamay_best_kernel_set(void) { return llamay_kernel_set_best(); }

int llamay_kernel_set_has_simd(int set, int type) { return simd_kernel(set, type) != NULL; }

int llamay_weight_init(llamay_weight *w, const void *data, int type, int n_rows, int n_cols,
                       int set) {
    const llamay_quant_type *q = llamay_quant_type_of(type);
    const llamay_matmul_fn reference = llamay_reference_kernel(type);
    if (q == NULL || reference == NULL || n_cols <= 0 || n_cols % q->block_elems != 0 ||
        n_rows < 0) {
        return -1;
    }
    if (!llamay_kernel_set_available(set)) {
        return -2;
    }
    const llamay_matmul_fn simd = simd_kernel(set, type);
    const int packed = simd != NULL && q->matmul == LLAMAY_MATMUL_Q32;
    const int kx8 = simd != NULL && llamay_is_kx8_type(type);
    const int n_blocks = n_cols / q->block_elems;
    w->data = data;
    w->type = type;
    w->n_rows = n_rows;
    w->n_cols = n_cols;
    w->row_bytes = (size_t)n_blocks * (size_t)q->block_bytes;
    w->packed_row_bytes =
        packed ? (size_t)(n_blocks / 8) * llamay_packed_group_bytes(type, 8) +
                     (size_t)llamay_packed_group_bytes(type, n_blocks % 8)
        : kx8  ? (size_t)n_blocks * (size_t)llamay_kx8_block_bytes(type) / LLAMAY_KX8_ROWS
               : 0;
    w->packed = NULL;
    w->act_kind = packed ? LLAMAY_ACT_Q8_0_X8 : act_kind_of(q);
    w->act_row_bytes = llamay_act_row_bytes(w->act_kind, n_cols);
    w->kernel = simd != NULL ? simd : reference;
    w->kernel_set = set;
    return 0;
}

/* ---- packing ---- */

/* The 32 quants of a block as unsigned codes (Q8_0's bytes as they are), and its fifth bits. */
static void block_codes(int type, const uint8_t *blk, uint8_t codes[32], uint32_t *fifth) {
    const uint8_t *qs;
    *fifth = 0;
    switch (type) {
    case LLAMAY_TYPE_Q8_0: memcpy(codes, blk + 2, 32); return;
    case LLAMAY_TYPE_Q4_1: qs = blk + 4; break;
    case LLAMAY_TYPE_Q5_0: memcpy(fifth, blk + 2, 4), qs = blk + 6; break;
    case LLAMAY_TYPE_Q5_1: memcpy(fifth, blk + 4, 4), qs = blk + 8; break;
    case LLAMAY_TYPE_MXFP4: qs = blk + 1; break;
    default: qs = blk + 2; break; /* Q4_0, IQ4_NL */
    }
    for (int i = 0; i < 16; i++) {
        codes[i] = qs[i] & 0xF;
        codes[i + 16] = qs[i] >> 4;
    }
}

size_t llamay_packed_bytes(const llamay_weight *w) {
    const size_t rows = llamay_is_kx8_type(w->type) && w->packed_row_bytes
                            ? ((size_t)w->n_rows + LLAMAY_KX8_ROWS - 1) / LLAMAY_KX8_ROWS *
                                  LLAMAY_KX8_ROWS
                            : (size_t)w->n_rows;
    return rows * w->packed_row_bytes;
}

/* ---- packing the K-quants, eight rows interleaved ---- */

/* Q4_K's or Q5_K's row `lane` of a group: its super-block (which both begin with d, dmin and
   the twelve bytes of scales and mins), with its nibbles qs and (Q5_K, else NULL) fifth bits
   qh, into the group's block g */
_Static_assert(offsetof(block_q4_K, scales) == 4 && offsetof(block_q5_K, scales) == 4,
               "Q4_K and Q5_K begin with d, dmin and the scales");

/* element e's four bits q of row `lane` into the chunks at `at` of the group's block g */
static void pack_kx8_nibble(int e, int q, int lane, uint8_t *g, int at) {
    const int c = e / 8, i = e % 4, high = (e % 8) / 4;
    g[at + 32 * c + 4 * lane + i] |= (uint8_t)(q << (4 * high));
}

static void pack_kx8_q4_K(const uint8_t *block, const uint8_t *qs, const uint8_t *qh, int lane,
                          uint8_t *g) {
    memcpy(g + 2 * lane, block, 2);
    memcpy(g + 16 + 2 * lane, block + 2, 2);
    for (int j = 0; j < 8; j++) {
        int scale, min;
        llamay_q4_K_scale_min(block + 4, j, &scale, &min);
        g[LLAMAY_KX8_Q4_K_SCALES + 16 * (j / 2) + 2 * lane + j % 2] = (uint8_t)scale;
        g[LLAMAY_KX8_Q4_K_MINS + 16 * (j / 2) + 2 * lane + j % 2] = (uint8_t)min;
    }
    for (int e = 0; e < 256; e++) {
        /* the file: qs[32 (e / 64) + e % 32], low nibble for e % 64 < 32; qh[e % 32] bit e / 32 */
        const uint8_t q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0xF;
        pack_kx8_nibble(e, q, lane, g, LLAMAY_KX8_Q4_K_QUANTS);
        if (qh != NULL) {
            const int c = e / 8, i = e % 4, high = (e % 8) / 4;
            const int fifth = (qh[e % 32] >> (e / 32)) & 1;
            g[LLAMAY_KX8_Q5_K_FIFTH + 32 * (c / 4) + 4 * lane + i] |=
                (uint8_t)(fifth << (c % 4 + 4 * high));
        }
    }
}

static void pack_kx8_q6_K(const block_q6_K *x, int lane, uint8_t *g) {
    memcpy(g + 2 * lane, &x->d, 2);
    for (int k = 0; k < 16; k++) {
        g[LLAMAY_KX8_Q6_K_SCALES + 16 * (k / 2) + 2 * lane + k % 2] = (uint8_t)x->scales[k];
    }
    for (int e = 0; e < 256; e++) {
        /* the file (matmul_ref.c's terms_q6_K): per 128 elements, ql[l + 32 (quarter % 2)]
           low/high nibble, qh[l] bits 2 quarter */
        const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
        const int low = (x->ql[64 * half + l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
        const int high = (x->qh[32 * half + l] >> (2 * quarter)) & 3;
        const int c = e / 8, i = e % 4, upper = (e % 8) / 4;
        pack_kx8_nibble(e, low, lane, g, LLAMAY_KX8_Q6_K_LOW);
        /* use s = 0..3 at bits 4, 6, 0, 2: the first lands in place, the others one shift
           away (matmul_kx8.h) */
        static const int bit[4] = {4, 6, 0, 2};
        const int s = 2 * (c % 2) + upper;
        g[LLAMAY_KX8_Q6_K_HIGH + 32 * (c / 2) + 4 * lane + i] |= (uint8_t)(high << bit[s]);
    }
}

/* Q3_K's and Q2_K's element e of row `lane`: its two low bits (code) and, for Q3_K, its third
   bit (high; -1 for none), into the group's block g at low (and high) */
static void pack_kx8_two_bits(int e, int code, int high, int lane, uint8_t *g, int low_at,
                              int high_at) {
    const int c = e / 8, i = e % 4, half = (e % 8) / 4;
    g[low_at + 32 * (c / 2) + 4 * lane + i] |= (uint8_t)(code << (2 * (2 * (c % 2) + half)));
    if (high >= 0) {
        g[high_at + 32 * (c / 4) + 4 * lane + i] |= (uint8_t)(high << (2 * (c % 4) + half));
    }
}

static void pack_kx8_q3_K(const block_q3_K *x, int lane, uint8_t *g) {
    memcpy(g + 2 * lane, &x->d, 2);
    int scales[16];
    llamay_q3_K_scales(x->scales, scales);
    for (int j = 0; j < 16; j++) {
        g[LLAMAY_KX8_Q3_K_SCALES + 16 * (j / 2) + 2 * lane + j % 2] = (uint8_t)(int8_t)scales[j];
    }
    for (int e = 0; e < 256; e++) { /* the file: as matmul_ref.c's terms_q3_K */
        const int half = e / 128, shift = (e % 128) / 32, l = e % 32;
        const int low = (x->qs[32 * half + l] >> (2 * shift)) & 3;
        const int high = (x->hmask[l] >> (4 * half + shift)) & 1;
        pack_kx8_two_bits(e, low, high, lane, g, LLAMAY_KX8_Q3_K_LOW, LLAMAY_KX8_Q3_K_HIGH);
    }
}

static void pack_kx8_q2_K(const block_q2_K *x, int lane, uint8_t *g) {
    memcpy(g + 2 * lane, &x->d, 2);
    memcpy(g + 16 + 2 * lane, &x->dmin, 2);
    for (int j = 0; j < 16; j++) {
        g[LLAMAY_KX8_Q2_K_SCALES + 16 * (j / 2) + 2 * lane + j % 2] = x->scales[j];
    }
    for (int e = 0; e < 256; e++) { /* the file: as matmul_ref.c's terms_q2_K */
        const int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
        const int code = (x->qs[32 * half + l] >> shift) & 3;
        pack_kx8_two_bits(e, code, -1, lane, g, LLAMAY_KX8_Q2_K_CODES, 0);
    }
}

static void pack_kx8_iq4_xs(const block_iq4_xs *x, int lane, uint8_t *g) {
    memcpy(g + 2 * lane, &x->d, 2);
    for (int j = 0; j < 8; j++) {
        const int scale = llamay_iq4_xs_scale(x->scales_h, x->scales_l, j);
        g[LLAMAY_KX8_IQ4_XS_SCALES + 16 * (j / 2) + 2 * lane + j % 2] = (uint8_t)(int8_t)scale;
    }
    for (int e = 0; e < 256; e++) { /* the file: as matmul_ref.c's terms_iq4_xs */
        const int l = e % 32, byte = x->qs[16 * (e / 32) + l % 16];
        pack_kx8_nibble(e, l < 16 ? byte & 0xF : byte >> 4, lane, g, LLAMAY_KX8_IQ4_XS_QUANTS);
    }
}

/* where a KX8 block's 32-byte chunks begin (before: fp16 arrays and scale pairs) */
static int kx8_chunks_offset(int type) {
    switch (type) {
    case LLAMAY_TYPE_Q6_K: return LLAMAY_KX8_Q6_K_LOW;
    case LLAMAY_TYPE_Q3_K: return LLAMAY_KX8_Q3_K_LOW;
    case LLAMAY_TYPE_Q2_K: return LLAMAY_KX8_Q2_K_CODES;
    case LLAMAY_TYPE_IQ4_XS: return LLAMAY_KX8_IQ4_XS_QUANTS;
    default: return LLAMAY_KX8_Q4_K_QUANTS;
    }
}

/* The bytes of row lane within a KX8 block, zeroed: a row owns 2 bytes of each fp16 array
   and of each scale pair, and 4 bytes of each 32-byte chunk. */
static void clear_kx8_lane(int type, int lane, uint8_t *g) {
    const int block_bytes = llamay_kx8_block_bytes(type);
    const int chunks_from = kx8_chunks_offset(type);
    for (int at = 0; at < chunks_from; at += 16) {
        memset(g + at + 2 * lane, 0, 2);
    }
    for (int at = chunks_from; at < block_bytes; at += 32) {
        memset(g + at + 4 * lane, 0, 4);
    }
}

static void pack_kx8_row(const llamay_weight *w, uint8_t *packed, int r) {
    const int n_blocks = w->n_cols / 256, block_bytes = llamay_kx8_block_bytes(w->type);
    uint8_t *group = packed + (size_t)(r / LLAMAY_KX8_ROWS) * (size_t)n_blocks * block_bytes;
    for (int b = 0; b < n_blocks; b++) {
        uint8_t *g = group + (size_t)b * block_bytes;
        clear_kx8_lane(w->type, r % LLAMAY_KX8_ROWS, g);
        if (r >= w->n_rows) {
            continue;
        }
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        const int lane = r % LLAMAY_KX8_ROWS;
        if (w->type == LLAMAY_TYPE_Q4_K) {
            const block_q4_K *x = (const block_q4_K *)row + b;
            pack_kx8_q4_K((const uint8_t *)x, x->qs, NULL, lane, g);
        } else if (w->type == LLAMAY_TYPE_Q5_K) {
            const block_q5_K *x = (const block_q5_K *)row + b;
            pack_kx8_q4_K((const uint8_t *)x, x->qs, x->qh, lane, g);
        } else if (w->type == LLAMAY_TYPE_Q6_K) {
            pack_kx8_q6_K((const block_q6_K *)row + b, lane, g);
        } else if (w->type == LLAMAY_TYPE_Q3_K) {
            pack_kx8_q3_K((const block_q3_K *)row + b, lane, g);
        } else if (w->type == LLAMAY_TYPE_IQ4_XS) {
            pack_kx8_iq4_xs((const block_iq4_xs *)row + b, lane, g);
        } else {
            pack_kx8_q2_K((const block_q2_K *)row + b, lane, g);
        }
    }
}

void llamay_weight_pack(const llamay_weight *w, uint8_t *packed, int row_begin, int row_end) {
    if (llamay_is_kx8_type(w->type)) {
        for (int r = row_begin; r < row_end; r++) {
            pack_kx8_row(w, packed, r);
            if (r == w->n_rows - 1) { /* the rows the last group lacks: zeros */
                for (int pad = r + 1; pad % LLAMAY_KX8_ROWS; pad++) {
                    pack_kx8_row(w, packed, pad);
                }
            }
        }
        return;
    }
    const int type = w->type, n_blocks = w->n_cols / 32;
    const size_t block_bytes = w->row_bytes / (size_t)n_blocks;
    const int group_bytes = llamay_packed_group_bytes(type, 8);
    for (int r = row_begin; r < row_end; r++) {
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        uint8_t *out = packed + (size_t)r * w->packed_row_bytes;
        memset(out, 0, w->packed_row_bytes);
        for (int b = 0; b < n_blocks; b++) {
            const uint8_t *blk = row + (size_t)b * block_bytes;
            uint8_t *group = out + (size_t)(b / 8) * group_bytes;
            const int j = b % 8, n = llamay_group_blocks(n_blocks, b / 8);
            const int scales = llamay_packed_scales_offset(type, n);
            const int fifth_bits = llamay_packed_fifth_bits_offset(type, n);
            uint8_t codes[32];
            uint32_t fifth;
            block_codes(type, blk, codes, &fifth);
            for (int i = 0; i < 32; i++) {
                const int p = llamay_x8_position(j, i, n);
                if (type == LLAMAY_TYPE_Q8_0) {
                    group[p] = codes[i];
                    continue;
                }
                /* chunk c = 4h + 2 * high_nibble + s lives in byte 8nh + 4ns + p % 4n */
                const int c = i / 4, h = c / 4, high = (c / 2) % 2, s = c % 2;
                group[8 * n * h + 4 * n * s + p % (4 * n)] |= (uint8_t)(codes[i] << (4 * high));
                if ((fifth >> i) & 1) {
                    group[fifth_bits + p / 8] |= (uint8_t)(1u << (p % 8));
                }
            }
            if (type == LLAMAY_TYPE_MXFP4) {
                group[scales + j] = blk[0];
            } else {
                memcpy(group + scales + 2 * j, blk, 2);
            }
            if (llamay_packed_has_mins(type)) {
                memcpy(group + llamay_packed_mins_offset(type, n) + 2 * j, blk + 2, 2);
            }
        }
    }
}

/* ---- activations ---- */

/* Quantize with ggml's quantizer (kernel set `set`'s version of it) a few blocks at a time,
   then lay the row out as the kernels read it (matmul_kernels.h). */
static void quantize_row_q8_0_layout(const float *x, int n_cols, int kind, int set,
                                     uint8_t *row) {
    const llamay_from_float_fn quantize = llamay_quant_type_of(LLAMAY_TYPE_Q8_0)->from_float[set];
    enum { CHUNK = 16 };
    block_q8_0 blocks[CHUNK];
    const llamay_act_q a = llamay_act_q_row(row, kind, n_cols);
    int8_t *qs = (int8_t *)a.qs;
    float *d = (float *)a.d;
    int16_t *sum = (int16_t *)a.sum;
    const int n_blocks = n_cols / 32;
    for (int b0 = 0; b0 < n_blocks; b0 += CHUNK) {
        const int n = n_blocks - b0 < CHUNK ? n_blocks - b0 : CHUNK;
        quantize(x + 32 * b0, blocks, 32 * n);
        for (int i = 0; i < n; i++) {
            const int b = b0 + i;
            if (kind == LLAMAY_ACT_Q8_0_X8) {
                int8_t *group = qs + 256 * (b / 8);
                for (int k = 0; k < 32; k += 4) {
                    memcpy(group + llamay_x8_position(b % 8, k, 8), blocks[i].qs + k, 4);
                }
            } else {
                memcpy(qs + 32 * b, blocks[i].qs, 32);
            }
            d[b] = llamay_fp16_to_fp32(blocks[i].d);
            int s = 0;
            for (int j = 0; j < 32; j++) {
                s += blocks[i].qs[j];
            }
            sum[b] = (int16_t)s;
        }
    }
    const int padded = (int)(llamay_act_padded_cols(kind, n_cols) / 32);
    for (int b = n_blocks; b < padded; b++) { /* blocks that pad the last group */
        int8_t *group = qs + 256 * (b / 8);
        for (int k = 0; k < 32; k += 4) {
            memset(group + llamay_x8_position(b % 8, k, 8), 0, 4);
        }
        d[b] = 0;
        sum[b] = 0;
    }
}

static void quantize_row_q8_K_layout(const float *x, int n_cols, int set, uint8_t *row) {
    const llamay_from_float_fn quantize = llamay_quant_type_of(LLAMAY_TYPE_Q8_K)->from_float[set];
    enum { CHUNK = 4 };
    block_q8_K blocks[CHUNK];
    const llamay_act_q a = llamay_act_q_row(row, LLAMAY_ACT_Q8_K, n_cols);
    int8_t *qs = (int8_t *)a.qs;
    float *d = (float *)a.d;
    int16_t *sum = (int16_t *)a.sum;
    const int n_blocks = n_cols / 256;
    for (int b0 = 0; b0 < n_blocks; b0 += CHUNK) {
        const int n = n_blocks - b0 < CHUNK ? n_blocks - b0 : CHUNK;
        quantize(x + 256 * b0, blocks, 256 * n);
        for (int i = 0; i < n; i++) {
            const int b = b0 + i;
            memcpy(qs + 256 * b, blocks[i].qs, 256);
            d[b] = blocks[i].d;
            memcpy(sum + 16 * b, blocks[i].bsums, sizeof blocks[i].bsums);
        }
    }
}

void llamay_quantize_activations(const llamay_weight *w, const float *x, int tok_begin,
                                 int tok_end, uint8_t *act) {
    for (int t = tok_begin; t < tok_end; t++) {
        const float *xt = x + (size_t)t * w->n_cols;
        uint8_t *row = act + (size_t)t * w->act_row_bytes;
        switch (w->act_kind) {
        case LLAMAY_ACT_Q8_0:
        case LLAMAY_ACT_Q8_0_X8:
            quantize_row_q8_0_layout(xt, w->n_cols, w->act_kind, w->kernel_set, row);
            break;
        case LLAMAY_ACT_Q8_K: quantize_row_q8_K_layout(xt, w->n_cols, w->kernel_set, row); break;
        default: memcpy(row, xt, (size_t)w->n_cols * sizeof(float)); break;
        }
    }
}

/* ---- a thread's scratch ---- */

static _Thread_local struct {
    void *memory;
    size_t bytes;
} scratch;

/* The key's value is the thread's scratch, which its destructor frees as the thread ends. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_key_once = PTHREAD_ONCE_INIT;

static void make_scratch_key(void) { pthread_key_create(&scratch_key, free); }

static void set_scratch(void *memory, size_t bytes) {
    pthread_once(&scratch_key_once, make_scratch_key);
    free(scratch.memory);
    scratch.memory = memory;
    scratch.bytes = memory != NULL ? bytes : 0;
    pthread_setspecific(scratch_key, memory);
}

void *llamay_matmul_scratch(size_t bytes) {
    if (bytes > scratch.bytes) {
        set_scratch(aligned_alloc(64, (bytes + 63) / 64 * 64), bytes);
    }
    return scratch.memory;
}

static void release_scratch(void *arg, int i, int n) {
    (void)arg, (void)i, (void)n;
    set_scratch(NULL, 0);
}

void llamay_matmul_release_scratch(void) {
    llamay_parallel(llamay_pool_threads(), release_scratch, NULL);
}

/* ---- multiplication ---- */

void llamay_matmul(const llamay_weight *w, const uint8_t *act, int n_tokens, float *out,
                   int row_begin, int row_end) {
    if (row_begin < row_end && n_tokens > 0) {
        w->kernel(w, act, n_tokens, out, (size_t)w->n_rows, row_begin, row_end);
    }
}

typedef struct {
    const llamay_matmul_job *jobs;
    int n_jobs, n_tokens, repeats;
    llamay_barrier barrier; /* the forward step's (barrier.h) */
} matmul_region;

static void run_matmuls(void *arg, int i, int n) {
    matmul_region *r = arg;
    for (int repeat = 0; repeat < r->repeats; repeat++) {
        for (int j = 0; j < r->n_jobs; j++) {
            const llamay_weight *w = r->jobs[j].w;
            int begin, end;
            llamay_thread_share(r->n_tokens, 1, i, n, &begin, &end);
            llamay_quantize_activations(w, r->jobs[j].x, begin, end, r->jobs[j].act);
            llamay_barrier_wait(&r->barrier, n);
            llamay_thread_share(w->n_rows, 16, i, n, &begin, &end);
            llamay_matmul(w, r->jobs[j].act, r->n_tokens, r->jobs[j].out, begin, end);
            llamay_barrier_wait(&r->barrier, n);
        }
    }
}

void llamay_matmul_parallel(const llamay_matmul_job *jobs, int n_jobs, int n_tokens, int repeats,
                            int n_threads) {
    if (n_threads <= 0) {
        n_threads = llamay_cpu_count();
    }
    matmul_region region = {jobs, n_jobs, n_tokens, repeats, llamay_barrier_make(n_threads)};
    llamay_parallel(n_threads, run_matmuls, &region);
}

typedef struct {
    int rounds, sleep_every;
    int slots[LLAMAY_MAX_THREADS];
    int wrong;
    llamay_barrier barrier;
} barrier_check;

static void check_barrier(void *arg, int i, int n) {
    barrier_check *c = arg;
    int wrong = 0;
    for (int round = 1; round <= c->rounds; round++) {
        if (c->sleep_every > 0 && round % c->sleep_every == 0 && i == round % n) {
            const struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        __atomic_store_n(&c->slots[i], round, __ATOMIC_RELAXED);
        llamay_barrier_wait(&c->barrier, n);
        for (int j = 0; j < n; j++) {
            wrong += __atomic_load_n(&c->slots[j], __ATOMIC_RELAXED) != round;
        }
        llamay_barrier_wait(&c->barrier, n);
    }
    __atomic_add_fetch(&c->wrong, wrong, __ATOMIC_RELAXED);
}

int llamay_barrier_check(int n_threads, int rounds, int sleep_every) {
    if (n_threads < 1 || n_threads > LLAMAY_MAX_THREADS) {
        return -1;
    }
    barrier_check check = {.rounds = rounds, .sleep_every = sleep_every};
    check.barrier = llamay_barrier_make(n_threads);
    if (llamay_parallel(n_threads, check_barrier, &check) != 0) {
        return -1;
    }
    return check.wrong;
}
