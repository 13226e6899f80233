/* Dequantization of every ggml block format llamay runs, and quantization into the formats the
   matmul kernels use for activations.

   Every kernel has a plain scalar reference (`_ref`, written after ggml-quants.c) and, where the
   format is hot, a SIMD version that gives the same bits for every input. The row functions are
   single-threaded, for use inside the kernels' own parallel regions; llamay_dequantize and
   llamay_quantize split a large tensor over threads by blocks. */
#ifndef LLAMAY_QUANTS_H
#define LLAMAY_QUANTS_H

#include <stdint.h>

#include "blocks.h"
#include "ggml_types.h"
#include "kernel_set.h"

/* n is a number of elements, a multiple of the format's block size */
typedef void (*llamay_to_float_fn)(const void *restrict x, float *restrict y, int64_t n);
typedef void (*llamay_from_float_fn)(const float *restrict x, void *restrict y, int64_t n);

/* A row of ggml_types.h, with its row functions. Each kernel set has its own entry (the set's
   SIMD version, or the scalar reference where it has none; AVX-512 CPUs run the AVX2 ones),
   chosen at run time like the matmul kernels and kernels.h: the engine's set reaches them
   all, `reference` the scalar references. Every entry gives the same bits. */
typedef struct {
    const char *name; /* NULL: an id ggml does not use */
    int id;
    int block_elems;
    int block_bytes;
    int refused;     /* known, and declined by decision (IQ1_S, IQ1_M) */
    int matmul;      /* enum llamay_matmul_family */
    llamay_to_float_fn to_float[LLAMAY_KERNEL_SETS];     /* NULL where llamay has no kernel */
    llamay_from_float_fn from_float[LLAMAY_KERNEL_SETS]; /* NULL where it does not quantize */
} llamay_quant_type;

/* The type with this ggml id, or NULL where llamay has no kernel for it. */
const llamay_quant_type *llamay_quant_type_of(int type_id);
/* The row of ggml_types.h with this id, kernels or not; NULL for an id it does not list. */
const llamay_quant_type *llamay_ggml_type(int type_id);
/* One past the largest id in the table. */
int llamay_ggml_type_ids(void);

/* Whole tensors, split over threads when large, with the row functions of kernel set
   `set` (which must be compiled in: kernel_set.h). */
void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                       int set);
void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n, int set);

/* Rows quantized with an importance matrix `qw` (n_per_row weights, one per column), as
   ggml's quantize_q*_* do when given one. */
typedef void (*llamay_weighted_row_fn)(const float *x, void *y, int64_t n_per_row,
                                       const float *qw);
/* The weighted quantizer of a type, or NULL for one that takes no weights (Q8_0, MXFP4, the
   plain numbers). */
llamay_weighted_row_fn llamay_weighted_quantizer(int type_id);

/* n_rows rows of n_per_row values of type `from` (x) into type `to` (y), on one thread, with
   the importance matrix `imatrix` where it is not NULL and `to` takes one. Returns 0, or -1
   where its scratch memory could not be had. */
int llamay_convert_rows(const llamay_quant_type *from, const void *x, const llamay_quant_type *to,
                        void *y, int64_t n_rows, int64_t n_per_row, const float *imatrix,
                        int set);

/* The first of n_blocks blocks that holds an inf or NaN (value, or scale), or -1: what
   llama.cpp's ggml_validate_row_data refuses. */
int64_t llamay_first_invalid_block(int type_id, const void *data, int64_t n_blocks);

/* Rows: n elements, a multiple of the block size. `_ref` is the scalar reference; `_avx2`,
   where ggml_types.h lists one, the AVX2 version (dequantize_avx2.c, quantize_avx2.c),
   bit-exact with it. */
#define LLAMAY_TO_FLOAT(name) void name(const void *restrict x, float *restrict y, int64_t n)
#define LLAMAY_FROM_FLOAT(name) void name(const float *restrict x, void *restrict y, int64_t n)

/* the row functions of every type, as its deq and quant columns say */
#define LLAMAY_ROWS_NONE(kind, name)
#define LLAMAY_ROWS_REFUSED(kind, name)
#define LLAMAY_ROWS_REF(kind, name) LLAMAY_ROW_##kind(name##_ref);
#define LLAMAY_ROWS_AVX2(kind, name) LLAMAY_ROWS_REF(kind, name) LLAMAY_ROW_##kind(name##_avx2);
#define LLAMAY_ROW_DEQ(name) LLAMAY_TO_FLOAT(llamay_dequantize_row_##name)
#define LLAMAY_ROW_QUANT(name) LLAMAY_FROM_FLOAT(llamay_quantize_row_##name)
#define LLAMAY_DECLARE_ROWS(NAME, name, id, elems, bytes, deq, quant, ...)                       \
    LLAMAY_ROWS_##deq(DEQ, name) LLAMAY_ROWS_##quant(QUANT, name)
LLAMAY_GGML_TYPES(LLAMAY_DECLARE_ROWS)
#undef LLAMAY_DECLARE_ROWS

#endif
