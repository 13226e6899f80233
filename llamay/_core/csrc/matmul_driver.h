/* The tiling drivers of the SIMD matmul kernel sets, written once: which outputs a tile
   computes together, how token chunks and blocks of rows are walked, when a decode step
   streams a large matrix row by row, and how results are gathered and stored. None of that
   changes an output's bits (matmul.h: the order inside one output is the tile functions', and
   the same in every tile shape).

   Included at the end of matmul_avx2.c, matmul_avx512.c and matmul_neon_body.h (as
   kernels_body.h is, per vec16.h build). Everything here is `static`: each set has its own
   copy. The including file defines:

   MATMUL_FN(name)              the name of its kernel for a type (avx2_q4_0)
   MATMUL_KERNEL_OF             its lookup function (llamay_avx2_kernel), defined here
   MATMUL_COLUMN(avx2, avx512, neon)
                                its column of ggml_types.h: the types it has kernels for
   INLINE, TOKEN_CHUNK          always_inline; tokens whose accumulators a prefill tile keeps

   and its tile and row functions:

   fp32 weights (F32, F16, BF16):
     float_tile(type, w, act, t0, r0, out, out_stride, rows, tokens): rows x tokens outputs,
       written to out. FLOAT_TILE_ROWS x FLOAT_TILE_TOKENS is the prefill tile; a lone token
       takes tiles of 4 rows.
   32-element formats (the packed copy):
     q32_table, q32_table_for(type): what decoding the type's quants needs (a lookup table)
     q32_acc: the accumulator of one row x one token (eight fp32 lanes)
     q32_row(type, w, a, r, table): one row x one token (a: its llamay_act_q), returned
     MATMUL_Q32_ROW_TOKENS: 1 where the set has q32_row_tokens(type, w, a, n_tok, r, table,
       results, column): one row x the n_tok tokens of a[], into results[t][column], for
       decode steps of a large matrix (elsewhere they take the prefill tiles)
     q32_tile(type, w, act, t0, n_tok, r0, results, column, rows, acc, table): `rows` rows
       from r0 x tokens t0.., into results[t][column + i], with acc[i][t] to accumulate in;
       Q32_TILE_ROWS rows at a time, then one.
   256-element formats: Q2_K..Q6_K and IQ4_XS take the KX8 kernel (matmul_kx8.h, included
   before this file); for the others, where MATMUL_K_ROW is 1:
     k_row(type, w, act, t0, n_tok, r, results, column, scratch): one row x tokens t0..,
       into results[t][column]; scratch: TOKEN_CHUNK x LLAMAY_QUANT_LANES floats it may use
     MATMUL_K_ROWS8: 1 where the set also has k_rows8(type, w, a, r0): eight rows x one token
       (a: its llamay_act_q) as a vector, and k_store8(out, vector), for decode steps of a
       large matrix.

   (With these, the AVX-512 set compiles to the very instructions its hand-written drivers
   did; the buffers stay in the driver's frame for that reason.) */

/* ======================= fp32 weights ======================= */

INLINE void float_kernel(int type, const llamay_weight *w, const uint8_t *act, int n_tokens,
                         float *out, size_t out_stride, int row_begin, int row_end) {
    int t = 0;
    for (; t + FLOAT_TILE_TOKENS <= n_tokens; t += FLOAT_TILE_TOKENS) {
        int r = row_begin;
        for (; r + FLOAT_TILE_ROWS <= row_end; r += FLOAT_TILE_ROWS) {
            float_tile(type, w, act, t, r, out, out_stride, FLOAT_TILE_ROWS, FLOAT_TILE_TOKENS);
        }
        for (; r < row_end; r++) {
            float_tile(type, w, act, t, r, out, out_stride, 1, FLOAT_TILE_TOKENS);
        }
    }
    for (; t < n_tokens; t++) {
        int r = row_begin;
        for (; r + 4 <= row_end; r += 4) {
            float_tile(type, w, act, t, r, out, out_stride, 4, 1);
        }
        for (; r < row_end; r++) {
            float_tile(type, w, act, t, r, out, out_stride, 1, 1);
        }
    }
}

/* ======================= 32-element formats x Q8_0, packed ======================= */

INLINE void q32_kernel(int type, const llamay_weight *w, const uint8_t *act, int n_tokens,
                       float *out, size_t out_stride, int row_begin, int row_end) {
    const q32_table table = q32_table_for(type);
    if (n_tokens == 1) {
        const llamay_act_q a = llamay_act_q_of(w, act, 0);
        for (int r = row_begin; r < row_end; r++) {
            out[r] = q32_row(type, w, &a, r, table);
        }
        return;
    }
#if MATMUL_Q32_ROW_TOKENS
    if (llamay_streams_rows(w, n_tokens)) {
        /* Decode steps: each row is read from memory once and stays in L1 for every token's
           dot; the same arithmetic as one token alone, so the bits do not depend on n_tokens. */
        llamay_act_q a[LLAMAY_DECODE_TOKENS];
        for (int t = 0; t < n_tokens; t++) {
            a[t] = llamay_act_q_of(w, act, t);
        }
        /* Gathered per block of rows, then stored a cache line per token: the tokens' output
           rows lie a whole (power-of-two) vocabulary apart, in one cache set. */
        float results[LLAMAY_DECODE_TOKENS][LLAMAY_ROW_BLOCK];
        for (int r0 = row_begin; r0 < row_end; r0 += LLAMAY_ROW_BLOCK) {
            const int n_rows = row_end - r0 < LLAMAY_ROW_BLOCK ? row_end - r0 : LLAMAY_ROW_BLOCK;
            for (int r = 0; r < n_rows; r++) {
                q32_row_tokens(type, w, a, n_tokens, r0 + r, table, results, r);
            }
            llamay_store_results(out, out_stride, 0, n_tokens, r0, n_rows, results);
        }
        return;
    }
#endif
    q32_acc acc[Q32_TILE_ROWS][TOKEN_CHUNK];
    float results[TOKEN_CHUNK][LLAMAY_ROW_BLOCK];
    for (int t0 = 0; t0 < n_tokens; t0 += TOKEN_CHUNK) {
        const int n_tok = n_tokens - t0 < TOKEN_CHUNK ? n_tokens - t0 : TOKEN_CHUNK;
        for (int r0 = row_begin; r0 < row_end; r0 += LLAMAY_ROW_BLOCK) {
            const int n_rows = row_end - r0 < LLAMAY_ROW_BLOCK ? row_end - r0 : LLAMAY_ROW_BLOCK;
            int r = 0;
            for (; r + Q32_TILE_ROWS <= n_rows; r += Q32_TILE_ROWS) {
                q32_tile(type, w, act, t0, n_tok, r0 + r, results, r, Q32_TILE_ROWS, acc, table);
            }
            for (; r < n_rows; r++) {
                q32_tile(type, w, act, t0, n_tok, r0 + r, results, r, 1, acc, table);
            }
            llamay_store_results(out, out_stride, t0, n_tok, r0, n_rows, results);
        }
    }
}

/* ======================= 256-element formats x Q8_K ======================= */

INLINE void k_kernel(int type, const llamay_weight *w, const uint8_t *act, int n_tokens,
                     float *out, size_t out_stride, int row_begin, int row_end) {
    if (llamay_is_kx8_type(type)) { /* the eight-row interleaved copy (matmul_kx8.h) */
        kx8_kernel(type, w, act, n_tokens, out, out_stride, row_begin, row_end);
        return;
    }
#if MATMUL_K_ROW
    float scratch[TOKEN_CHUNK][LLAMAY_QUANT_LANES];
#if MATMUL_K_ROWS8
    if (llamay_streams_rows(w, n_tokens)) {
        /* Decode steps: eight rows at a time, read from memory once for every token's dots
           (the same arithmetic as one token alone). */
        llamay_act_q a[LLAMAY_DECODE_TOKENS];
        for (int t = 0; t < n_tokens; t++) {
            a[t] = llamay_act_q_of(w, act, t);
        }
        if (n_tokens == 1) {
            int r = row_begin;
            for (; r + 8 <= row_end; r += 8) {
                k_store8(out + r, k_rows8(type, w, &a[0], r));
            }
            if (r < row_end) {
                float results[1][LLAMAY_ROW_BLOCK];
                for (int i = 0; r + i < row_end; i++) {
                    k_row(type, w, act, 0, 1, r + i, results, i, scratch);
                }
                llamay_store_results(out, out_stride, 0, 1, r, row_end - r, results);
            }
            return;
        }
        /* Gathered per block of rows, then stored a cache line per token (see q32_kernel). */
        float results[LLAMAY_DECODE_TOKENS][LLAMAY_ROW_BLOCK];
        for (int r0 = row_begin; r0 < row_end; r0 += LLAMAY_ROW_BLOCK) {
            const int n_rows = row_end - r0 < LLAMAY_ROW_BLOCK ? row_end - r0 : LLAMAY_ROW_BLOCK;
            int r = 0;
            for (; r + 8 <= n_rows; r += 8) {
                for (int t = 0; t < n_tokens; t++) {
                    k_store8(&results[t][r], k_rows8(type, w, &a[t], r0 + r));
                }
            }
            for (; r < n_rows; r++) {
                k_row(type, w, act, 0, n_tokens, r0 + r, results, r, scratch);
            }
            llamay_store_results(out, out_stride, 0, n_tokens, r0, n_rows, results);
        }
        return;
    }
#endif
    float results[TOKEN_CHUNK][LLAMAY_ROW_BLOCK];
    for (int t0 = 0; t0 < n_tokens; t0 += TOKEN_CHUNK) {
        const int n_tok = n_tokens - t0 < TOKEN_CHUNK ? n_tokens - t0 : TOKEN_CHUNK;
        for (int r0 = row_begin; r0 < row_end; r0 += LLAMAY_ROW_BLOCK) {
            const int n_rows = row_end - r0 < LLAMAY_ROW_BLOCK ? row_end - r0 : LLAMAY_ROW_BLOCK;
            for (int r = 0; r < n_rows; r++) {
                k_row(type, w, act, t0, n_tok, r0 + r, results, r, scratch);
            }
            llamay_store_results(out, out_stride, t0, n_tok, r0, n_rows, results);
        }
    }
#endif
}

/* ======================= the kernels, and the table of the set ======================= */

#define MATMUL_KERNEL_FLOAT(name, NAME) MATMUL_KERNEL(name, NAME, float_kernel)
#define MATMUL_KERNEL_Q32(name, NAME) MATMUL_KERNEL(name, NAME, q32_kernel)
#define MATMUL_KERNEL_K(name, NAME) MATMUL_KERNEL(name, NAME, k_kernel)
#define MATMUL_KERNEL(name, NAME, driver)                                                       \
    static void MATMUL_FN(name)(const llamay_weight *w, const uint8_t *act, int n_tokens,       \
                                float *out, size_t out_stride, int row_begin, int row_end) {    \
        driver(LLAMAY_TYPE_##NAME, w, act, n_tokens, out, out_stride, row_begin, row_end);      \
    }
#define MATMUL_DEFINE(NAME, name, id, elems, bytes, deq, quant, matmul, avx2, avx512, neon)     \
    LLAMAY_IF_SET(MATMUL_COLUMN(avx2, avx512, neon))(MATMUL_KERNEL_##matmul(name, NAME))
#define MATMUL_CASE(NAME, name, id, elems, bytes, deq, quant, matmul, avx2, avx512, neon)       \
    LLAMAY_IF_SET(MATMUL_COLUMN(avx2, avx512, neon))(                                          \
        case LLAMAY_TYPE_##NAME: return MATMUL_FN(name);)

LLAMAY_GGML_TYPES(MATMUL_DEFINE)

llamay_matmul_fn MATMUL_KERNEL_OF(int type) {
    switch (type) {
    LLAMAY_GGML_TYPES(MATMUL_CASE)
    default: return NULL;
    }
}
