/* vec16.h's operations, one lane array in and out, so that the harness can hold the NEON
   implementation to the reference lane for lane. Compiled twice: with LLAMAY_VEC set to
   LLAMAY_VEC_REF and VEC_OPS named vec_ops_ref, and to LLAMAY_VEC_NEON and vec_ops_neon. */
#include "vec_ops.h"

#include "vec16.h"

/* out[op][i] for the VEC_OP_* operations over lanes i of a, b, c (n a multiple of 16) */
void VEC_OPS(const float *a, const float *b, const float *c, int n, float *out) {
    for (int i = 0; i < n; i += 16) {
        const v16 x = v16_load(a + i), y = v16_load(b + i), z = v16_load(c + i);
        v16_store(out + (size_t)VEC_OP_ADD * n + i, v16_add(x, y));
        v16_store(out + (size_t)VEC_OP_SUB * n + i, v16_sub(x, y));
        v16_store(out + (size_t)VEC_OP_MUL * n + i, v16_mul(x, y));
        v16_store(out + (size_t)VEC_OP_DIV * n + i, v16_div(x, y));
        v16_store(out + (size_t)VEC_OP_FMA * n + i, v16_fma(x, y, z));
        v16_store(out + (size_t)VEC_OP_MAX * n + i, v16_max(x, y));
        v16_store(out + (size_t)VEC_OP_MIN * n + i, v16_min(x, y));
        v16_store(out + (size_t)VEC_OP_ABS * n + i, v16_abs(x));
        v16_store(out + (size_t)VEC_OP_COPYSIGN * n + i, v16_copysign(x, y));
        v16_store(out + (size_t)VEC_OP_SELECT_LT * n + i, v16_select(v16_lt(x, y), z, x));
        v16_store(out + (size_t)VEC_OP_EXP * n + i, v16_exp(x));
        v16_store(out + (size_t)VEC_OP_TANH * n + i, v16_tanh(x));
    }
}

/* 2^n of each lane of n (integers in [-127, 127]) */
void VEC_EXP2I(const float *n, int count, float *out) {
    for (int i = 0; i < count; i += 16) {
        v16_store(out + i, v16_exp2i(v16_load(n + i)));
    }
}

/* each 16 halves, and each 16 int8, converted */
void VEC_LOADS(const uint16_t *halves, const int8_t *bytes, int n, float *from_halves,
               float *from_bytes) {
    for (int i = 0; i < n; i += 16) {
        v16_store(from_halves + i, v16_load_f16(halves + i));
        v16_store(from_bytes + i, v16_load_i8(bytes + i));
    }
}

/* lanes [0, m) of a round-tripped through the partial load and store, m = 0..16, into
   out[17 * 16] (out prefilled by the caller: what the store leaves alone stays) */
void VEC_PARTIAL(const float *a, float *out) {
    for (int m = 0; m <= 16; m++) {
        v16_store_partial(out + 16 * m, v16_add(v16_load_partial(a, m), v16_zero()), m);
    }
}

/* the tree and the max of each 16 lanes, and v16_tree8 of each 128 lanes (eight rows) */
void VEC_REDUCE(const float *a, int n, float *tree, float *hmax, float *tree8) {
    for (int i = 0; i < n; i += 16) {
        tree[i / 16] = v16_tree(v16_load(a + i));
        hmax[i / 16] = v16_hmax(v16_load(a + i));
    }
    for (int i = 0; i + 128 <= n; i += 128) {
        v16_tree_pair u[4];
        for (int r = 0; r < 4; r++) {
            u[r] = v16_tree8_first(v16_load(a + i + 16 * r), v16_load(a + i + 16 * (r + 4)));
        }
        v16_tree8_rest(u, 0.75f, tree8 + i / 16);
    }
}
