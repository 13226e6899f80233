/* Dequantization of every ggml block format llamay runs, and quantization into the formats the
   matmul kernels use for activations.

   Every kernel has a plain scalar reference (`_ref`, written after ggml-quants.c) and, where the
   format is hot, a SIMD version that gives the same bits for every input. The row functions are
   single-threaded, for use inside the kernels' own parallel regions; llamay_dequantize and
   llamay_quantize split a large tensor over OpenMP threads by blocks. */
#ifndef LLAMAY_QUANTS_H
#define LLAMAY_QUANTS_H

#include <stdint.h>

#include "blocks.h"

/* The SIMD kernels need AVX2 and F16C (every AVX2 CPU has both); without them (a build with
   LLAMAY_PORTABLE=1, or another CPU) the scalar references do all the work. */
#if defined(__AVX2__) && defined(__F16C__)
#define LLAMAY_AVX2 1
#endif

/* ggml type ids, as stored in GGUF files (ggml.h's enum ggml_type) */
enum llamay_ggml_type {
    LLAMAY_TYPE_F32 = 0,
    LLAMAY_TYPE_F16 = 1,
    LLAMAY_TYPE_Q4_0 = 2,
    LLAMAY_TYPE_Q4_1 = 3,
    LLAMAY_TYPE_Q5_0 = 6,
    LLAMAY_TYPE_Q5_1 = 7,
    LLAMAY_TYPE_Q8_0 = 8,
    LLAMAY_TYPE_Q2_K = 10,
    LLAMAY_TYPE_Q3_K = 11,
    LLAMAY_TYPE_Q4_K = 12,
    LLAMAY_TYPE_Q5_K = 13,
    LLAMAY_TYPE_Q6_K = 14,
    LLAMAY_TYPE_Q8_K = 15,
    LLAMAY_TYPE_IQ2_XXS = 16,
    LLAMAY_TYPE_IQ2_XS = 17,
    LLAMAY_TYPE_IQ3_XXS = 18,
    LLAMAY_TYPE_IQ4_NL = 20,
    LLAMAY_TYPE_IQ3_S = 21,
    LLAMAY_TYPE_IQ2_S = 22,
    LLAMAY_TYPE_IQ4_XS = 23,
    LLAMAY_TYPE_I8 = 24,
    LLAMAY_TYPE_I16 = 25,
    LLAMAY_TYPE_I32 = 26,
    LLAMAY_TYPE_I64 = 27,
    LLAMAY_TYPE_F64 = 28,
    LLAMAY_TYPE_BF16 = 30,
    LLAMAY_TYPE_TQ1_0 = 34,
    LLAMAY_TYPE_TQ2_0 = 35,
    LLAMAY_TYPE_MXFP4 = 39,
    LLAMAY_TYPE_NVFP4 = 40,
    LLAMAY_TYPE_Q1_0 = 41,
};

/* n is a number of elements, a multiple of the format's block size */
typedef void (*llamay_to_float_fn)(const void *restrict x, float *restrict y, int64_t n);
typedef void (*llamay_from_float_fn)(const float *restrict x, void *restrict y, int64_t n);

typedef struct {
    const char *name;
    int block_elems;
    int block_bytes;
    llamay_to_float_fn to_float;           /* the fastest compiled in */
    llamay_to_float_fn to_float_ref;       /* the scalar reference */
    llamay_from_float_fn from_float;       /* NULL where llamay does not quantize to the type */
    llamay_from_float_fn from_float_ref;
} llamay_quant_type;

/* The type with this ggml id, or NULL where llamay has no kernel for it. */
const llamay_quant_type *llamay_quant_type_of(int type_id);

/* Whole tensors, split over OpenMP threads when large. */
void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                       int reference);
void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n,
                     int reference);

/* Rows: n elements, a multiple of the block size. `_ref` is the scalar reference; the
   unsuffixed name, where there is one, is the SIMD version (or the reference, in a build
   without SIMD), bit-exact with it. */
#define LLAMAY_TO_FLOAT(name) void name(const void *restrict x, float *restrict y, int64_t n)
#define LLAMAY_FROM_FLOAT(name) void name(const float *restrict x, void *restrict y, int64_t n)

LLAMAY_TO_FLOAT(llamay_dequantize_row_f32_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_f16_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_f16);
LLAMAY_TO_FLOAT(llamay_dequantize_row_bf16_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_i8_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_i16_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_i32_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_i64_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_f64_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q4_0_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q4_1_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q5_0_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q5_0);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q5_1_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q8_0_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q8_0);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq4_nl_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_mxfp4_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_nvfp4_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q1_0_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q2_K_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q3_K_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q4_K_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q4_K);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q5_K_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q6_K_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q6_K);
LLAMAY_TO_FLOAT(llamay_dequantize_row_q8_K_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq2_xxs_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq2_xs_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq2_s_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq3_xxs_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq3_s_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_iq4_xs_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_tq1_0_ref);
LLAMAY_TO_FLOAT(llamay_dequantize_row_tq2_0_ref);

LLAMAY_FROM_FLOAT(llamay_quantize_row_f32_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_f16_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_f16);
LLAMAY_FROM_FLOAT(llamay_quantize_row_bf16_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q4_0_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q4_1_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q5_0_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q5_1_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q8_0_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q8_0);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q8_K_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q4_K_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q5_K_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q6_K_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_mxfp4_ref);
LLAMAY_FROM_FLOAT(llamay_quantize_row_q8_K);

#endif
