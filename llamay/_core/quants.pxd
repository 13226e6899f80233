# The C side of the quantization kernels (csrc/quants.h), for quants.pyx and for the kernels that
# cimport it; an extension that does must also compile csrc/quants.c, dequantize.c and quantize.c.
from libc.stdint cimport int64_t


cdef extern from "quants.h" nogil:
    enum:
        LLAMAY_KERNEL_SETS

    ctypedef void (*llamay_to_float_fn)(const void *x, float *y, int64_t n)
    ctypedef void (*llamay_from_float_fn)(const float *x, void *y, int64_t n)

    ctypedef struct llamay_quant_type:
        const char *name
        int id
        int block_elems
        int block_bytes
        int refused
        llamay_to_float_fn to_float[LLAMAY_KERNEL_SETS]
        llamay_from_float_fn from_float[LLAMAY_KERNEL_SETS]

    const llamay_quant_type *llamay_quant_type_of(int type_id)
    const llamay_quant_type *llamay_ggml_type(int type_id)
    int llamay_ggml_type_ids()
    void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                           int kernel_set)
    void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n,
                         int kernel_set)
    int llamay_convert_rows(const llamay_quant_type *src, const void *x,
                            const llamay_quant_type *dst, void *y, int64_t n_rows,
                            int64_t n_per_row, const float *imatrix, int kernel_set)
    int64_t llamay_first_invalid_block(int type_id, const void *data, int64_t n_blocks)
