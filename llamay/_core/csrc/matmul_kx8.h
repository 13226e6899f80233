/* Q4_K, Q5_K and Q6_K x Q8_K over the eight-row interleaved copy (KX8, matmul_kernels.h), in
   AVX2.

   Included by matmul_avx2.c and matmul_avx512.c (every AVX-512 CPU runs AVX2: the same code,
   the same bits). A 32-bit lane is one of the eight rows of a group: a chunk of 32 weight bytes
   holds eight elements of each row, the activations' four bytes are broadcast, and vpmaddubsw
   (unsigned weights x signed activations into int16 pairs) then vpmaddwd (by the row's
   sub-block scale) add each row's products into its own int32 lane. So a super-block's exact
   integer dot products come out as one vector of eight rows, never reduced horizontally, and the
   reference's fp32 steps (matmul.h: per super-block b, fmaf(d_w * d_a, i1, lane b % 8), then
   the min term, then the tree) run with the rows as SIMD lanes.

   The int16 sums never saturate: a Q4_K pair is at most 2 x 15 x 128 in magnitude, and one
   sub-block's eight of them per lane (four chunks) sum to at most 30720; a Q5_K pair at most
   2 x 31 x 128, so its int16 sums are taken to int32 two chunks at a time, at most 31744; a
   Q6_K pair at most 2 x 63 x 128, taken to int32 one chunk at a time, at most 32256.

   Many tokens (prefill, or a decode step of several sequences) share each chunk as it is
   decoded, KX8_TOKENS at a time; every token's arithmetic is the same as alone. */

#define KX8_TOKENS 4

/* llamay_tree8 of eight accumulators held lane by lane */
INLINE __m256 kx8_tree8(const __m256 a[8]) {
    const __m256 s0 = _mm256_add_ps(a[0], a[4]), s1 = _mm256_add_ps(a[1], a[5]);
    const __m256 s2 = _mm256_add_ps(a[2], a[6]), s3 = _mm256_add_ps(a[3], a[7]);
    return _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
}

INLINE __m256i kx8_broadcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* int16 pair lanes [a, b] of each row -> [a, a] and [b, b] */
INLINE __m256i kx8_first_of_pairs(__m256i v) {
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13,
                                                   12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9,
                                                   12, 13, 12, 13));
}

INLINE __m256i kx8_second_of_pairs(__m256i v) {
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14,
                                                   15, 14, 15, 2, 3, 2, 3, 6, 7, 6, 7, 10, 11,
                                                   10, 11, 14, 15, 14, 15));
}

/* the int32 (B_2p, B_2p+1) of activation sums, as the int16 pair madd takes: B_j is the sum of
   the quants of sub-block j (of `per` 16-element sums each) */
INLINE __m256i kx8_sum_pair(const int16_t *sums, int p, int per) {
    int b0 = 0, b1 = 0;
    for (int k = 0; k < per; k++) {
        b0 += sums[2 * p * per + k];
        b1 += sums[(2 * p + 1) * per + k];
    }
    return _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)b0 | ((uint32_t)(uint16_t)b1 << 16)));
}

/* Q5_K: the fifth bits of chunk k (of a sub-block's four) at bit 4 of each byte, for its low
   and its high nibbles (matmul_kernels.h: bits k and 4 + k; 16-bit shifts by constants, no bit
   crossing into bit 4 of another byte) */
INLINE __m256i kx8_fifth_low(__m256i f, int k) {
    switch (k) {
    case 0: return _mm256_slli_epi16(f, 4);
    case 1: return _mm256_slli_epi16(f, 3);
    case 2: return _mm256_slli_epi16(f, 2);
    default: return _mm256_slli_epi16(f, 1);
    }
}

INLINE __m256i kx8_fifth_high(__m256i f, int k) {
    switch (k) {
    case 0: return f;
    case 1: return _mm256_srli_epi16(f, 1);
    case 2: return _mm256_srli_epi16(f, 2);
    default: return _mm256_srli_epi16(f, 3);
    }
}

/* Chunk c's products for each token, added into its int16 sums: lo and hi are the chunk's
   weights of elements 8c + i and 8c + 4 + i (i = 0..3) in each row's four bytes */
INLINE void kx8_chunk_pairs(__m256i lo, __m256i hi, const int8_t *const *x, const int nt, int c,
                            __m256i *sum16) {
    for (int t = 0; t < nt; t++) {
        const __m256i dl = _mm256_maddubs_epi16(lo, kx8_broadcast4(x[t] + 8 * c));
        const __m256i dh = _mm256_maddubs_epi16(hi, kx8_broadcast4(x[t] + 8 * c + 4));
        sum16[t] = _mm256_add_epi16(sum16[t], _mm256_add_epi16(dl, dh));
    }
}

/* Q4_K: sub-block j's integer dots, times its scales, added into i1 (the int16 sums of its
   four chunks, then one madd) */
INLINE void kx8_q4_K_sub_block(const uint8_t *quants, const int8_t *const *x, const int nt, int j,
                               __m256i scale, __m256i *i1) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i sum16[KX8_TOKENS];
    for (int t = 0; t < nt; t++) {
        sum16[t] = _mm256_setzero_si256();
    }
    for (int c = 4 * j; c < 4 * j + 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(quants + 32 * c));
        const __m256i lo = _mm256_and_si256(q, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        kx8_chunk_pairs(lo, hi, x, nt, c, sum16);
    }
    for (int t = 0; t < nt; t++) {
        i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(sum16[t], scale));
    }
}

/* Q5_K: the same with each nibble's fifth bit joined at bit 4 (the int16 sums taken to int32
   two chunks at a time) */
INLINE void kx8_q5_K_sub_block(const uint8_t *quants, const uint8_t *fifths,
                               const int8_t *const *x, const int nt, int j, __m256i scale,
                               __m256i *i1) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i fifth = _mm256_loadu_si256((const __m256i *)(fifths + 32 * j));
    for (int half = 0; half < 2; half++) {
        __m256i sum16[KX8_TOKENS];
        for (int t = 0; t < nt; t++) {
            sum16[t] = _mm256_setzero_si256();
        }
        for (int k = 2 * half; k < 2 * half + 2; k++) {
            const int c = 4 * j + k;
            const __m256i q = _mm256_loadu_si256((const __m256i *)(quants + 32 * c));
            const __m256i f_lo = _mm256_and_si256(kx8_fifth_low(fifth, k), bit4);
            const __m256i f_hi = _mm256_and_si256(kx8_fifth_high(fifth, k), bit4);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), f_lo);
            const __m256i hi =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), f_hi);
            kx8_chunk_pairs(lo, hi, x, nt, c, sum16);
        }
        for (int t = 0; t < nt; t++) {
            i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(sum16[t], scale));
        }
    }
}

/* The integer dot products of one super-block of the group with nt tokens' activations:
   i1[t] (and, for Q4_K and Q5_K, i2[t] = -the min term), eight rows each. */
INLINE void kx8_ints(int type, const uint8_t *g, const llamay_act_q *const *a, int b,
                     const int nt, __m256i *i1, __m256i *i2) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const int8_t *x[KX8_TOKENS];
    for (int t = 0; t < nt; t++) {
        x[t] = a[t]->qs + 256 * (size_t)b;
        i1[t] = _mm256_setzero_si256();
    }
    if (type == LLAMAY_TYPE_Q4_K || type == LLAMAY_TYPE_Q5_K) {
        const uint8_t *quants = g + LLAMAY_KX8_Q4_K_QUANTS;
        for (int p = 0; p < 4; p++) {
            const __m256i pair = _mm256_cvtepu8_epi16(
                _mm_loadu_si128((const __m128i *)(g + LLAMAY_KX8_Q4_K_SCALES + 16 * p)));
            for (int s = 0; s < 2; s++) {
                const int j = 2 * p + s; /* sub-block: chunks 4j .. 4j+3 */
                const __m256i scale = s ? kx8_second_of_pairs(pair) : kx8_first_of_pairs(pair);
                if (type == LLAMAY_TYPE_Q4_K) {
                    kx8_q4_K_sub_block(quants, x, nt, j, scale, i1);
                } else {
                    kx8_q5_K_sub_block(quants, g + LLAMAY_KX8_Q5_K_FIFTH, x, nt, j, scale, i1);
                }
            }
        }
        for (int t = 0; t < nt; t++) {
            const int16_t *sums = a[t]->sum + 16 * (size_t)b;
            __m256i mins = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                const __m256i pair = _mm256_cvtepu8_epi16(
                    _mm_loadu_si128((const __m128i *)(g + LLAMAY_KX8_Q4_K_MINS + 16 * p)));
                mins = _mm256_add_epi32(mins, _mm256_madd_epi16(pair, kx8_sum_pair(sums, p, 2)));
            }
            i2[t] = _mm256_sub_epi32(_mm256_setzero_si256(), mins);
        }
        return;
    }
    /* Q6_K: quants q = low | high << 4 in [0, 64); i1 = sum sc (q - 32) x, as
       sum sc q x - 32 sum sc B over the sub-blocks */
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    const uint8_t *lows = g + LLAMAY_KX8_Q6_K_LOW, *highs = g + LLAMAY_KX8_Q6_K_HIGH;
    __m256i offset[KX8_TOKENS];
    for (int t = 0; t < nt; t++) {
        offset[t] = _mm256_setzero_si256();
    }
    for (int p = 0; p < 8; p++) {
        /* sub-blocks 2p, 2p+1 of sixteen elements: chunks 4p .. 4p+3, high-bit pairs 2p, 2p+1 */
        const __m256i pair = _mm256_cvtepi8_epi16(
            _mm_loadu_si128((const __m128i *)(g + LLAMAY_KX8_Q6_K_SCALES + 16 * p)));
        for (int t = 0; t < nt; t++) {
            const __m256i bsum = kx8_sum_pair(a[t]->sum + 16 * (size_t)b, p, 1);
            offset[t] = _mm256_add_epi32(offset[t], _mm256_madd_epi16(pair, bsum));
        }
        for (int m = 2 * p; m < 2 * p + 2; m++) {
            const __m256i scale = m % 2 ? kx8_second_of_pairs(pair) : kx8_first_of_pairs(pair);
            const __m256i h = _mm256_loadu_si256((const __m256i *)(highs + 32 * m));
            for (int k = 0; k < 2; k++) {
                const int c = 2 * m + k;
                const __m256i q = _mm256_loadu_si256((const __m256i *)(lows + 32 * c));
                /* the high bits, moved to bits 4-5 (no bit crosses into a kept position) */
                const __m256i hl = k ? _mm256_slli_epi16(h, 4) : h;
                const __m256i hh = k ? _mm256_slli_epi16(h, 2) : _mm256_srli_epi16(h, 2);
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4),
                                                   _mm256_and_si256(hl, bits45));
                const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
                                                   _mm256_and_si256(hh, bits45));
                for (int t = 0; t < nt; t++) {
                    const __m256i dl = _mm256_maddubs_epi16(lo, kx8_broadcast4(x[t] + 8 * c));
                    const __m256i dh = _mm256_maddubs_epi16(hi, kx8_broadcast4(x[t] + 8 * c + 4));
                    const __m256i sum16 = _mm256_add_epi16(dl, dh);
                    i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(sum16, scale));
                }
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        i1[t] = _mm256_sub_epi32(i1[t], _mm256_slli_epi32(offset[t], 5));
    }
}

/* Eight rows (the group holding row r0) against nt tokens: their accumulators' trees, a vector
   of eight rows per token, into out[t]. */
INLINE void kx8_group(int type, const llamay_weight *w, const llamay_act_q *const *a, int r0,
                      const int nt, __m256 *out) {
    const int nb = w->n_cols / 256;
    __m256 acc[KX8_TOKENS][LLAMAY_QUANT_LANES];
    for (int t = 0; t < nt; t++) {
        for (int l = 0; l < LLAMAY_QUANT_LANES; l++) {
            acc[t][l] = _mm256_setzero_ps();
        }
    }
    const int block_bytes = llamay_kx8_block_bytes(type);
    for (int b = 0; b < nb; b++) {
        const uint8_t *g = llamay_kx8_block(w, r0, b);
        llamay_prefetch_ahead(g, (size_t)block_bytes); /* a group's blocks lie end to end */
        __m256i i1[KX8_TOKENS], i2[KX8_TOKENS];
        kx8_ints(type, g, a, b, nt, i1, i2);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        const int lane = b % LLAMAY_QUANT_LANES;
        for (int t = 0; t < nt; t++) {
            const __m256 da = _mm256_set1_ps(a[t]->d[b]);
            __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(i1[t]),
                                       acc[t][lane]);
            if (type != LLAMAY_TYPE_Q6_K) { /* Q4_K, Q5_K: the mins */
                const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 16)));
                s = _mm256_fmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(i2[t]), s);
            }
            acc[t][lane] = s;
        }
    }
    for (int t = 0; t < nt; t++) {
        out[t] = kx8_tree8(acc[t]);
    }
}

/* Rows [row_begin, row_end) (row_begin a multiple of 8: threads split rows by 16) x n_tokens. */
INLINE void kx8_kernel(int type, const llamay_weight *w, const uint8_t *act, int n_tokens,
                       float *out, size_t out_stride, int row_begin, int row_end) {
    /* the results of a block of sixteen rows, stored a cache line per token: the tokens'
       output rows may lie a power of two apart, in one cache set */
    float results[TOKEN_CHUNK][LLAMAY_ROW_BLOCK];
    llamay_act_q acts[TOKEN_CHUNK];
    for (int t0 = 0; t0 < n_tokens; t0 += TOKEN_CHUNK) {
        const int n_tok = n_tokens - t0 < TOKEN_CHUNK ? n_tokens - t0 : TOKEN_CHUNK;
        for (int t = 0; t < n_tok; t++) {
            acts[t] = llamay_act_q_of(w, act, t0 + t);
        }
        for (int r0 = row_begin; r0 < row_end; r0 += LLAMAY_ROW_BLOCK) {
            const int n_rows = row_end - r0 < LLAMAY_ROW_BLOCK ? row_end - r0 : LLAMAY_ROW_BLOCK;
            for (int g = 0; g < n_rows; g += LLAMAY_KX8_ROWS) {
                for (int t = 0; t < n_tok; t += KX8_TOKENS) {
                    const llamay_act_q *a[KX8_TOKENS];
                    __m256 v[KX8_TOKENS];
                    const int nt = n_tok - t < KX8_TOKENS ? n_tok - t : KX8_TOKENS;
                    for (int k = 0; k < nt; k++) {
                        a[k] = &acts[t + k];
                    }
                    switch (nt) { /* a constant count: the token loops unroll into registers */
                    case 1: kx8_group(type, w, a, r0 + g, 1, v); break;
                    case 2: kx8_group(type, w, a, r0 + g, 2, v); break;
                    case 3: kx8_group(type, w, a, r0 + g, 3, v); break;
                    default: kx8_group(type, w, a, r0 + g, 4, v); break;
                    }
                    for (int k = 0; k < nt; k++) {
                        _mm256_storeu_ps(&results[t + k][g], v[k]);
                    }
                }
            }
            llamay_store_results(out, out_stride, t0, n_tok, r0, n_rows, results);
        }
    }
}
