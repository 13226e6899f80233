/* The table of ggml types (generated from ggml_types.h) with each kernel set's row functions,
   and the whole-tensor drivers that split work over threads (threads.h). Blocks are independent,
   so the result does not depend on the split. */
#include <stddef.h>

#include "quants.h"
#include "threads.h"

/* The row functions of each kernel set, by the deq and quant columns: the reference set takes
   the scalar references, AVX2 and AVX-512 the AVX2 versions where the table lists one and the
   build compiles them, NEON and the rest the references; NULL where there is none. */
#if LLAMAY_WITH_AVX2
#define SIMD_ROW(row) row##_avx2
#else
#define SIMD_ROW(row) row##_ref
#endif
#define ROWS_NONE(row) {NULL, NULL, NULL, NULL}
#define ROWS_REFUSED(row) {NULL, NULL, NULL, NULL}
#define ROWS_REF(row) {row##_ref, row##_ref, row##_ref, row##_ref}
#define ROWS_AVX2(row) {row##_ref, SIMD_ROW(row), SIMD_ROW(row), row##_ref}

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
_Static_assert(LLAMAY_KERNEL_SETS == 4, "ROWS_* give one function per kernel set");

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
   starting the threads, small enough to balance a few dozen threads on a large tensor. */
#define CHUNK_ELEMS 65536

typedef struct {
    const llamay_quant_type *type;
    const uint8_t *blocks; /* dequantize: in; quantize: out */
    float *floats;         /* dequantize: out; quantize: in */
    int64_t n_blocks;
    int set;
    int dequantize;
} convert_job;

static int64_t chunks_of(const convert_job *job) {
    const int64_t per_chunk = CHUNK_ELEMS / job->type->block_elems;
    return (job->n_blocks + per_chunk - 1) / per_chunk;
}

/* Thread i's chunks: every n-th, from the i-th. */
static void convert_chunks(void *arg, int i, int n) {
    const convert_job *job = arg;
    const llamay_quant_type *type = job->type;
    const int64_t per_chunk = CHUNK_ELEMS / type->block_elems;
    for (int64_t c = i; c < chunks_of(job); c += n) {
        const int64_t first = c * per_chunk;
        const int64_t count = job->n_blocks - first < per_chunk ? job->n_blocks - first : per_chunk;
        uint8_t *blocks = (uint8_t *)job->blocks + first * type->block_bytes;
        float *floats = job->floats + first * type->block_elems;
        if (job->dequantize) {
            type->to_float[job->set](blocks, floats, count * type->block_elems);
        } else {
            type->from_float[job->set](floats, blocks, count * type->block_elems);
        }
    }
}

static void convert(convert_job *job) {
    llamay_parallel(chunks_of(job) > 1 ? 0 : 1, convert_chunks, job);
}

void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                       int set) {
    convert_job job = {type, x, y, n / type->block_elems, set, 1};
    convert(&job);
}

void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n, int set) {
    convert_job job = {type, y, (float *)x, n / type->block_elems, set, 0};
    convert(&job);
}
