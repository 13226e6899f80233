# The C side of the quantization kernels (csrc/quants.h), for quants.pyx and for the kernels that
# cimport it; an extension that does must also compile csrc/quants.c, dequantize.c and quantize.c.
from libc.stdint cimport int64_t


cdef extern from "quants.h" nogil:
    ctypedef void (*llamay_to_float_fn)(const void *x, float *y, int64_t n)
    ctypedef void (*llamay_from_float_fn)(const float *x, void *y, int64_t n)

    ctypedef struct llamay_quant_type:
        const char *name
        int block_elems
        int block_bytes
        llamay_to_float_fn to_float
        llamay_to_float_fn to_float_ref
        llamay_from_float_fn from_float
        llamay_from_float_fn from_float_ref

    const llamay_quant_type *llamay_quant_type_of(int type_id)
    void llamay_dequantize(const llamay_quant_type *type, const void *x, float *y, int64_t n,
                           int reference)
    void llamay_quantize(const llamay_quant_type *type, const float *x, void *y, int64_t n,
                         int reference)

    void llamay_quantize_row_q8_0(const float *x, void *y, int64_t n)
    void llamay_quantize_row_q8_K(const float *x, void *y, int64_t n)
