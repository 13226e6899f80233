/* The table of ggml types llamay has kernels for, and the whole-tensor drivers that split work
   over OpenMP threads. Blocks are independent, so the result does not depend on the split. */
#include <stddef.h>

#include "quants.h"

/* The (fastest, reference) pair of row functions: SIMD ones where they exist, else the
   scalar reference twice; NO_QUANT where llamay does not quantize to the type. */
#define DEQ(row) llamay_dequantize_row_##row, llamay_dequantize_row_##row##_ref
#define DEQ_REF(row) llamay_dequantize_row_##row##_ref, llamay_dequantize_row_##row##_ref
#define QUANT(row) llamay_quantize_row_##row, llamay_quantize_row_##row##_ref
#define QUANT_REF(row) llamay_quantize_row_##row##_ref, llamay_quantize_row_##row##_ref
#define NO_QUANT NULL, NULL

static const llamay_quant_type TYPES[] = {
    [LLAMAY_TYPE_F32] = {"F32", 1, 4, DEQ_REF(f32), QUANT_REF(f32)},
    [LLAMAY_TYPE_F16] = {"F16", 1, 2, DEQ(f16), QUANT(f16)},
    [LLAMAY_TYPE_BF16] = {"BF16", 1, 2, DEQ_REF(bf16), QUANT_REF(bf16)},
    [LLAMAY_TYPE_Q4_0] = {"Q4_0", QK4_0, sizeof(block_q4_0), DEQ_REF(q4_0), QUANT_REF(q4_0)},
    [LLAMAY_TYPE_Q4_1] = {"Q4_1", QK4_1, sizeof(block_q4_1), DEQ_REF(q4_1), QUANT_REF(q4_1)},
    [LLAMAY_TYPE_Q5_0] = {"Q5_0", QK5_0, sizeof(block_q5_0), DEQ(q5_0), QUANT_REF(q5_0)},
    [LLAMAY_TYPE_Q5_1] = {"Q5_1", QK5_1, sizeof(block_q5_1), DEQ_REF(q5_1), QUANT_REF(q5_1)},
    [LLAMAY_TYPE_Q8_0] = {"Q8_0", QK8_0, sizeof(block_q8_0), DEQ(q8_0), QUANT(q8_0)},
    [LLAMAY_TYPE_Q2_K] = {"Q2_K", QK_K, sizeof(block_q2_K), DEQ_REF(q2_K), NO_QUANT},
    [LLAMAY_TYPE_Q3_K] = {"Q3_K", QK_K, sizeof(block_q3_K), DEQ_REF(q3_K), NO_QUANT},
    [LLAMAY_TYPE_Q4_K] = {"Q4_K", QK_K, sizeof(block_q4_K), DEQ(q4_K), QUANT_REF(q4_K)},
    [LLAMAY_TYPE_Q5_K] = {"Q5_K", QK_K, sizeof(block_q5_K), DEQ_REF(q5_K), QUANT_REF(q5_K)},
    [LLAMAY_TYPE_Q6_K] = {"Q6_K", QK_K, sizeof(block_q6_K), DEQ(q6_K), QUANT_REF(q6_K)},
    [LLAMAY_TYPE_Q8_K] = {"Q8_K", QK_K, sizeof(block_q8_K), DEQ_REF(q8_K), QUANT(q8_K)},
    [LLAMAY_TYPE_IQ2_XXS] = {"IQ2_XXS", QK_K, sizeof(block_iq2_xxs), DEQ_REF(iq2_xxs), NO_QUANT},
    [LLAMAY_TYPE_IQ2_XS] = {"IQ2_XS", QK_K, sizeof(block_iq2_xs), DEQ_REF(iq2_xs), NO_QUANT},
    [LLAMAY_TYPE_IQ2_S] = {"IQ2_S", QK_K, sizeof(block_iq2_s), DEQ_REF(iq2_s), NO_QUANT},
    [LLAMAY_TYPE_IQ3_XXS] = {"IQ3_XXS", QK_K, sizeof(block_iq3_xxs), DEQ_REF(iq3_xxs), NO_QUANT},
    [LLAMAY_TYPE_IQ3_S] = {"IQ3_S", QK_K, sizeof(block_iq3_s), DEQ_REF(iq3_s), NO_QUANT},
    [LLAMAY_TYPE_IQ4_NL] = {"IQ4_NL", QK4_NL, sizeof(block_iq4_nl), DEQ_REF(iq4_nl), NO_QUANT},
    [LLAMAY_TYPE_IQ4_XS] = {"IQ4_XS", QK_K, sizeof(block_iq4_xs), DEQ_REF(iq4_xs), NO_QUANT},
    [LLAMAY_TYPE_TQ1_0] = {"TQ1_0", QK_K, sizeof(block_tq1_0), DEQ_REF(tq1_0), NO_QUANT},
    [LLAMAY_TYPE_TQ2_0] = {"TQ2_0", QK_K, sizeof(block_tq2_0), DEQ_REF(tq2_0), NO_QUANT},
    [LLAMAY_TYPE_MXFP4] = {"MXFP4", QK_MXFP4, sizeof(block_mxfp4), DEQ_REF(mxfp4), QUANT_REF(mxfp4)},
    [LLAMAY_TYPE_NVFP4] = {"NVFP4", QK_NVFP4, sizeof(block_nvfp4), DEQ_REF(nvfp4), NO_QUANT},
    [LLAMAY_TYPE_Q1_0] = {"Q1_0", QK1_0, sizeof(block_q1_0), DEQ_REF(q1_0), NO_QUANT},
    [LLAMAY_TYPE_I8] = {"I8", 1, 1, DEQ_REF(i8), NO_QUANT},
    [LLAMAY_TYPE_I16] = {"I16", 1, 2, DEQ_REF(i16), NO_QUANT},
    [LLAMAY_TYPE_I32] = {"I32", 1, 4, DEQ_REF(i32), NO_QUANT},
    [LLAMAY_TYPE_I64] = {"I64", 1, 8, DEQ_REF(i64), NO_QUANT},
    [LLAMAY_TYPE_F64] = {"F64", 1, 8, DEQ_REF(f64), NO_QUANT},
};

const llamay_quant_type *llamay_quant_type_of(int type_id) {
    const int n_ids = (int)(sizeof TYPES / sizeof TYPES[0]);
    if (type_id < 0 || type_id >= n_ids || TYPES[type_id].name == NULL) {
        return NULL;
    }
    return &TYPES[type_id];
}

/* Elements per unit of parallel work (a multiple of every block size): big enough to outweigh
   the fork/join, small enough to balance a few dozen threads on a large tensor. */
#define CHUNK_ELEMS 65536

void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                       int reference) {
    const llamay_to_float_fn row = reference ? type->to_float_ref : type->to_float;
    const int64_t n_blocks = n / type->block_elems;
    const int64_t per_chunk = CHUNK_ELEMS / type->block_elems;
    const int64_t n_chunks = (n_blocks + per_chunk - 1) / per_chunk;
#pragma omp parallel for schedule(static) if (n_chunks > 1)
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t first = c * per_chunk;
        const int64_t count = n_blocks - first < per_chunk ? n_blocks - first : per_chunk;
        row((const uint8_t *)x + first * type->block_bytes, y + first * type->block_elems,
            count * type->block_elems);
    }
}

void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n,
                     int reference) {
    const llamay_from_float_fn row = reference ? type->from_float_ref : type->from_float;
    const int64_t n_blocks = n / type->block_elems;
    const int64_t per_chunk = CHUNK_ELEMS / type->block_elems;
    const int64_t n_chunks = (n_blocks + per_chunk - 1) / per_chunk;
#pragma omp parallel for schedule(static) if (n_chunks > 1)
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t first = c * per_chunk;
        const int64_t count = n_blocks - first < per_chunk ? n_blocks - first : per_chunk;
        row(x + first * type->block_elems, (uint8_t *)y + first * type->block_bytes,
            count * type->block_elems);
    }
}
