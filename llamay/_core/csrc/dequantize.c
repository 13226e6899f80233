/* Dequantizers: ggml blocks -> fp32.

   Each `_ref` function is the scalar reference, written after ggml-quants.c and doing the same
   fp32 operations in the same order (the build has no fast-math and no FMA contraction), so its
   results are ggml's bit for bit. The hot formats also have an AVX2 version (`_avx2`, in
   dequantize_avx2.c). */
#include <string.h>

#include "fp16.h"
#include "iq_tables.h"
#include "quants.h"

static const uint8_t kmask_iq2xs[8] = {1, 2, 4, 8, 16, 32, 64, 128};

/* ======================================================================== plain numbers */

void llamay_dequantize_row_f32_ref(const void *restrict vx, float *restrict y, int64_t n) {
    memcpy(y, vx, (size_t)n * sizeof(float));
}

void llamay_dequantize_row_f16_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const ggml_half *x = vx;
    for (int64_t i = 0; i < n; i++) {
        y[i] = llamay_fp16_to_fp32_scalar(x[i]);
    }
}

void llamay_dequantize_row_bf16_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) {
        y[i] = llamay_bf16_to_fp32(x[i]);
    }
}

/* Integer and fp64 tensors convert to the nearest fp32, as a C cast (and numpy's astype) does. */
#define CONVERT_ROW(name, ctype)                                                              \
    void llamay_dequantize_row_##name##_ref(const void *restrict vx, float *restrict y,     \
                                            int64_t n) {                                     \
        const ctype *x = vx;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                    \
            y[i] = (float)x[i];                                                              \
        }                                                                                    \
    }
CONVERT_ROW(i8, int8_t)
CONVERT_ROW(i16, int16_t)
CONVERT_ROW(i32, int32_t)
CONVERT_ROW(i64, int64_t)
CONVERT_ROW(f64, double)
#undef CONVERT_ROW

/* ======================================================================== 32-element blocks */

void llamay_dequantize_row_q4_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * QK4_0 + j] = x0 * d;
            y[i * QK4_0 + j + QK4_0 / 2] = x1 * d;
        }
    }
}

void llamay_dequantize_row_q4_1_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float m = llamay_fp16_to_fp32_scalar(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int x0 = x[i].qs[j] & 0x0F;
            const int x1 = x[i].qs[j] >> 4;
            y[i * QK4_1 + j] = x0 * d + m;
            y[i * QK4_1 + j + QK4_1 / 2] = x1 * d + m;
        }
    }
}

void llamay_dequantize_row_q5_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = ((x[i].qs[j] & 0x0F) | xh0) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | xh1) - 16;
            y[i * QK5_0 + j] = x0 * d;
            y[i * QK5_0 + j + QK5_0 / 2] = x1 * d;
        }
    }
}

void llamay_dequantize_row_q5_1_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float m = llamay_fp16_to_fp32_scalar(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (x[i].qs[j] & 0x0F) | xh0;
            const int x1 = (x[i].qs[j] >> 4) | xh1;
            y[i * QK5_1 + j] = x0 * d + m;
            y[i * QK5_1 + j + QK5_1 / 2] = x1 * d + m;
        }
    }
}

void llamay_dequantize_row_q8_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK8_0; j++) {
            y[i * QK8_0 + j] = x[i].qs[j] * d;
        }
    }
}

void llamay_dequantize_row_iq4_nl_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[i * QK4_NL + j] = d * kvalues_iq4nl[x[i].qs[j] & 0x0F];
            y[i * QK4_NL + j + QK4_NL / 2] = d * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

/* An E8M0 exponent as 2^(e-127) / 2, the half matching the doubled kvalues_mxfp4. */
static inline float e8m0_to_fp32_half(uint8_t e) {
    return llamay_f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

void llamay_dequantize_row_mxfp4_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const float d = e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[i * QK_MXFP4 + j] = kvalues_mxfp4[x[i].qs[j] & 0x0F] * d;
            y[i * QK_MXFP4 + j + QK_MXFP4 / 2] = kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}

/* An unsigned E4M3 scale (bias 7, no sign; 0x7F, its NaN, reads as 0), halved like E8M0's. */
static inline float ue4m3_to_fp32_half(uint8_t u) {
    if (u == 0 || u == 0x7F) {
        return 0.0f;
    }
    const uint32_t exponent = (u >> 3) & 0x0F;
    const uint32_t mantissa = u & 0x07;
    if (exponent == 0) {
        return (float)mantissa * 0x1p-10f;
    }
    return llamay_f32_from_bits(((exponent - 7 - 1 + 127) << 23) | (mantissa << 20));
}

void llamay_dequantize_row_nvfp4_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_nvfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_NVFP4; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++) {
            const float d = ue4m3_to_fp32_half(x[i].d[s]);
            const uint8_t *qs = x[i].qs + s * (QK_NVFP4_SUB / 2);
            float *ys = y + i * QK_NVFP4 + s * QK_NVFP4_SUB;
            for (int j = 0; j < QK_NVFP4_SUB / 2; j++) {
                ys[j] = kvalues_mxfp4[qs[j] & 0x0F] * d;
                ys[j + QK_NVFP4_SUB / 2] = kvalues_mxfp4[qs[j] >> 4] * d;
            }
        }
    }
}

void llamay_dequantize_row_q1_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q1_0 *x = vx;
    for (int64_t i = 0; i < n / QK1_0; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < QK1_0; j++) {
            y[i * QK1_0 + j] = (x[i].qs[j / 8] >> (j % 8)) & 1 ? d : -d;
        }
    }
}

/* ======================================================================== K-quants */

void llamay_dequantize_row_q2_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float min = llamay_fp16_to_fp32_scalar(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0x0F);
                    const float ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) {
                        *y++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
                    }
                }
            }
        }
    }
}

/* The sixteen 6-bit scales of a Q3_K block, unpacked as signed bytes still offset by 32. */
static inline void q3_K_scales(const uint8_t packed[12], int8_t scales[16]) {
    for (int j = 0; j < 16; j++) {
        const int low = (packed[j % 8] >> (4 * (j / 8))) & 0x0F;
        const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        scales[j] = (int8_t)(low | (high << 4));
    }
}

void llamay_dequantize_row_q3_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = llamay_fp16_to_fp32_scalar(x[i].d);
        int8_t scales[16];
        q3_K_scales(x[i].scales, scales);
        const uint8_t *q = x[i].qs;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; part++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        const int low = (q[l] >> shift) & 3;
                        *y++ = dl * (low - (x[i].hmask[l] & m ? 0 : 4));
                    }
                }
            }
        }
    }
}


void llamay_dequantize_row_q4_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float min = llamay_fp16_to_fp32_scalar(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            int sc, m;
            llamay_q4_K_scale_min(x[i].scales, is, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            llamay_q4_K_scale_min(x[i].scales, is + 1, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void llamay_dequantize_row_q5_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const float min = llamay_fp16_to_fp32_scalar(x[i].dmin);
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            int sc, m;
            llamay_q4_K_scale_min(x[i].scales, is, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            llamay_q4_K_scale_min(x[i].scales, is + 1, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0x0F) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void llamay_dequantize_row_q6_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void llamay_dequantize_row_q8_K_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int j = 0; j < QK_K; j++) {
            y[i * QK_K + j] = x[i].d * x[i].qs[j];
        }
    }
}

/* ======================================================================== IQ formats */

void llamay_dequantize_row_iq2_xxs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq2_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            uint32_t aux[2]; /* 4 grid indices; 4 x 7 sign bits and a 4-bit scale */
            memcpy(aux, x[i].qs + 4 * ib32, sizeof aux);
            const uint8_t *index = (const uint8_t *)aux;
            const float db = d * (0.5f + (aux[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t *grid = (const uint8_t *)(iq2xxs_grid + index[l]);
                const uint8_t signs = ksigns_iq2xs[(aux[1] >> (7 * l)) & 127];
                for (int j = 0; j < 8; j++) {
                    y[j] = db * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq2_xs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq2_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            const float db[2] = {
                d * (0.5f + (x[i].scales[ib32] & 0x0F)) * 0.25f,
                d * (0.5f + (x[i].scales[ib32] >> 4)) * 0.25f,
            };
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = x[i].qs[4 * ib32 + l];
                const uint8_t *grid = (const uint8_t *)(iq2xs_grid + (q & 511));
                const uint8_t signs = ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++) {
                    y[j] = db[l / 2] * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq2_s_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq2_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *signs = x[i].qs + QK_K / 8;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 4, signs += 4) {
            const float db[2] = {
                d * (0.5f + (x[i].scales[ib32] & 0x0F)) * 0.25f,
                d * (0.5f + (x[i].scales[ib32] >> 4)) * 0.25f,
            };
            for (int l = 0; l < 4; l++, y += 8) {
                const int index = qs[l] | ((x[i].qh[ib32] << (8 - 2 * l)) & 0x300);
                const uint8_t *grid = (const uint8_t *)(iq2s_grid + index);
                for (int j = 0; j < 8; j++) {
                    y[j] = db[l / 2] * grid[j] * (signs[l] & kmask_iq2xs[j] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq3_xxs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq3_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *scales_and_signs = x[i].qs + QK_K / 4;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8) {
            uint32_t aux;
            memcpy(&aux, scales_and_signs + 4 * ib32, sizeof aux);
            const float db = d * (0.5f + (aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
                const uint8_t *grid1 = (const uint8_t *)(iq3xxs_grid + qs[2 * l]);
                const uint8_t *grid2 = (const uint8_t *)(iq3xxs_grid + qs[2 * l + 1]);
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid1[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
                    y[j + 4] = db * grid2[j] * (signs & kmask_iq2xs[j + 4] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq3_s_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq3_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *signs = x[i].signs;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8, signs += 4) {
            const uint8_t sc = x[i].scales[ib32 / 2];
            const float db = d * (1 + 2 * (ib32 % 2 ? sc >> 4 : sc & 0x0F));
            const uint8_t qh = x[i].qh[ib32];
            for (int l = 0; l < 4; l++, y += 8) {
                const int index1 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
                const int index2 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
                const uint8_t *grid1 = (const uint8_t *)(iq3s_grid + index1);
                const uint8_t *grid2 = (const uint8_t *)(iq3s_grid + index2);
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid1[j] * (signs[l] & kmask_iq2xs[j] ? -1.f : 1.f);
                    y[j + 4] = db * grid2[j] * (signs[l] & kmask_iq2xs[j + 4] ? -1.f : 1.f);
                }
            }
        }
    }
}

void llamay_dequantize_row_iq4_xs_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) |
                           (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0x0F];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* ======================================================================== ternary */

/* Ternary digit of a byte that holds them as a base-3 fraction: the top digit of q * 3 / 256. */
static inline int top_trit(uint8_t q) {
    return ((uint16_t)q * 3) >> 8;
}

void llamay_dequantize_row_tq1_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const block_tq1_0 *x = vx;
    const int n_qs = (int)sizeof x->qs;
    const int qs_in_32s = n_qs - n_qs % 32;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < qs_in_32s; j += 32) {
            for (int t = 0; t < 5; t++) {
                for (int m = 0; m < 32; m++) {
                    *y++ = (float)(top_trit((uint8_t)(x[i].qs[j + m] * pow3[t])) - 1) * d;
                }
            }
        }
        for (int j = qs_in_32s; j < n_qs; j += 16) {
            for (int t = 0; t < 5; t++) {
                for (int m = 0; m < 16; m++) {
                    *y++ = (float)(top_trit((uint8_t)(x[i].qs[j + m] * pow3[t])) - 1) * d;
                }
            }
        }
        for (int t = 0; t < 4; t++) {
            for (int j = 0; j < (int)sizeof x->qh; j++) {
                *y++ = (float)(top_trit((uint8_t)(x[i].qh[j] * pow3[t])) - 1) * d;
            }
        }
    }
}

void llamay_dequantize_row_tq2_0_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_tq2_0 *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = llamay_fp16_to_fp32_scalar(x[i].d);
        for (int j = 0; j < (int)sizeof x->qs; j += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int m = 0; m < 32; m++) {
                    *y++ = (float)(((x[i].qs[j + m] >> shift) & 3) - 1) * d;
                }
            }
        }
    }
}
