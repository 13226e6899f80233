/* vec_ops.c's functions, under the name of each implementation they are compiled for. */
#ifndef VEC_OPS_H
#define VEC_OPS_H

#include <stdint.h>

enum {
    VEC_OP_ADD,
    VEC_OP_SUB,
    VEC_OP_MUL,
    VEC_OP_DIV,
    VEC_OP_FMA,
    VEC_OP_MAX,
    VEC_OP_MIN,
    VEC_OP_ABS,
    VEC_OP_COPYSIGN,
    VEC_OP_SELECT_LT,
    VEC_OP_EXP,
    VEC_OP_TANH,
    VEC_OPS_COUNT
};

#define VEC_DECLARE(name)                                                                      \
    void vec_ops_##name(const float *a, const float *b, const float *c, int n, float *out);    \
    void vec_exp2i_##name(const float *n, int count, float *out);                              \
    void vec_loads_##name(const uint16_t *halves, const int8_t *bytes, int n,                  \
                          float *from_halves, float *from_bytes);                              \
    void vec_partial_##name(const float *a, float *out);                                       \
    void vec_reduce_##name(const float *a, int n, float *tree, float *hmax, float *tree8);

VEC_DECLARE(ref)
VEC_DECLARE(neon)

#ifdef VEC_NAME
#define VEC_CAT_(a, b) a##b
#define VEC_CAT(a, b) VEC_CAT_(a, b)
#define VEC_OPS VEC_CAT(vec_ops_, VEC_NAME)
#define VEC_EXP2I VEC_CAT(vec_exp2i_, VEC_NAME)
#define VEC_LOADS VEC_CAT(vec_loads_, VEC_NAME)
#define VEC_PARTIAL VEC_CAT(vec_partial_, VEC_NAME)
#define VEC_REDUCE VEC_CAT(vec_reduce_, VEC_NAME)
#endif

#endif
