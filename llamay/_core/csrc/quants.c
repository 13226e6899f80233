/* The table of ggml types (generated from ggml_types.h) with each kernel set's row functions,
   and the whole-tensor drivers that split work over OpenMP threads. Blocks are independent,
   so the result does not depend on the split. */
#include <stddef.h>

#include "quants.h"

/* The row functions of each kernel set, by the deq and quant columns: the reference set takes
   the scalar references, AVX2 and AVX-512 the AVX2 versions where the table lists one and the
   build compiles them, the references elsewhere; NULL where there is none. */
#if LLAMAY_HAVE_AVX2
#define SIMD_ROW(row) row##_avx2
#else
#define SIMD_ROW(row) row##_ref
#endif
#define ROWS_NONE(row) {NULL, NULL, NULL}
#define ROWS_REFUSED(row) {NULL, NULL, NULL}
#define ROWS_REF(row) {row##_ref, row##_ref, row##_ref}
#define ROWS_AVX2(row) {row##_ref, SIMD_ROW(row), SIMD_ROW(row)}

#define TYPE_ENTRY(NAME, name, id, elems, bytes, deq, quant, matmul, ...)                       \
    [id] = {#NAME, id, elems, bytes, DEQ_IS_REFUSED_##deq, LLAMAY_MATMUL_##matmul,            \
            ROWS_##deq(llamay_dequantize_row_##name), ROWS_##quant(llamay_quantize_row_##name)},
#define DEQ_IS_REFUSED_NONE 0
#define DEQ_IS_REFUSED_REFUSED 1
#define DEQ_IS_REFUSED_REF 0
#define DEQ_IS_REFUSED_AVX2 0

static const llamay_quant_type TYPES[] = {LLAMAY_GGML_TYPES(TYPE_ENTRY)};

/* Every block format the table runs has the size its struct in blocks.h has. */
#define CHECK_NONE(name, bytes)
#define CHECK_REFUSED(name, bytes)
#define CHECK_REF(name, bytes) _Static_assert(sizeof(block_##name) == bytes, #name " blocks");
#define CHECK_AVX2(name, bytes) CHECK_REF(name, bytes)
#define CHECK_BLOCK(NAME, name, id, elems, bytes, deq, ...) CHECK_##deq(name, bytes)
LLAMAY_GGML_TYPES(CHECK_BLOCK)
_Static_assert(LLAMAY_KERNEL_SETS == 3, "ROWS_* give one function per kernel set");

const llamay_quant_type *llamay_ggml_type(int type_id) {
    if (type_id < 0 || type_id >= llamay_ggml_type_ids() || TYPES[type_id].name == NULL) {
        return NULL;
    }
    return &TYPES[type_id];
}

int llamay_ggml_type_ids(void) { return (int)(sizeof TYPES / sizeof TYPES[0]); }

const llamay_quant_type *llamay_quant_type_of(int type_id) {
    const llamay_quant_type *t = llamay_ggml_type(type_id);
    return t != NULL && t->to_float[LLAMAY_KERNELS_REFERENCE] != NULL ? t : NULL;
}

/* Elements per unit of parallel work (a multiple of every block size): big enough to outweigh
   the fork/join, small enough to balance a few dozen threads on a large tensor. */
#define CHUNK_ELEMS 65536

void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                       int set) {
    const llamay_to_float_fn row = type->to_float[set];
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

void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n, int set) {
    const llamay_from_float_fn row = type->from_float[set];
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
