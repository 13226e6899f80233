/* The ggml tensor types, listed once.

   Everything that lists types is generated from this table: the type enum (below), the
   dequantize/quantize table (quants.c), which activations a weight takes and whether its
   kernels read a packed copy (matmul.c, matmul_kernels.h), the type -> kernel switch of each
   matmul kernel set (matmul_ref.c, matmul_driver.h), and, through llamay._core.quants.type_table,
   the Python table of llamay/gguf/types.py.

   A row is X(NAME, name, id, block_elems, block_bytes, deq, quant, matmul, avx2, avx512,
   neon):
   - NAME, id: ggml's name and id (ggml.h's enum ggml_type, as stored in GGUF files); `name`
     is the lower-case spelling the row functions and kernels are named after.
   - block_elems, block_bytes: elements per block and the bytes they take.
   - deq: REF, a scalar dequantizer (llamay_dequantize_row_<name>_ref); AVX2, an AVX2 one as
     well (_avx2); NONE, a type llamay knows by name but has no kernel for (Q8_1: no GGUF
     weights use it); REFUSED, a type llamay declines by decision (IQ1_S, IQ1_M; docs/gguf.md).
   - quant: whether llamay quantizes to the type: NONE, REF or AVX2, as for deq.
   - matmul: the kernel family that multiplies such weights (matmul.h has the order of each):
     FLOAT, fp32 dots over the weights converted element by element (fp32 activations);
     Q32, 32-element blocks x Q8_0 activations, read from a packed copy by the SIMD sets;
     K, 256-element super-blocks x Q8_K activations; DEQ, rows dequantized to fp32, then the
     FLOAT order; NONE, no matmul.
   - avx2, avx512, neon: 1 where that set has its own kernel for the type (elsewhere it runs
     the reference's, which gives the same bits, slower). */
#ifndef LLAMAY_GGML_TYPES_H
#define LLAMAY_GGML_TYPES_H

/* clang-format off */
#define LLAMAY_GGML_TYPES(X)                                                           \
    /* NAME     name     id  elems bytes  deq      quant  matmul  avx2 avx512 neon */ \
    X(F32,      f32,      0,     1,   4,  REF,     REF,   FLOAT,  1,   1,   1)      \
    X(F16,      f16,      1,     1,   2,  AVX2,    AVX2,  FLOAT,  1,   1,   1)      \
    X(Q4_0,     q4_0,     2,    32,  18,  REF,     REF,   Q32,    1,   1,   1)      \
    X(Q4_1,     q4_1,     3,    32,  20,  REF,     REF,   Q32,    1,   1,   1)      \
    X(Q5_0,     q5_0,     6,    32,  22,  AVX2,    REF,   Q32,    1,   1,   1)      \
    X(Q5_1,     q5_1,     7,    32,  24,  REF,     REF,   Q32,    1,   1,   1)      \
    X(Q8_0,     q8_0,     8,    32,  34,  AVX2,    AVX2,  Q32,    1,   1,   1)      \
    X(Q8_1,     q8_1,     9,    32,  36,  NONE,    NONE,  NONE,   0,   0,   0)      \
    X(Q2_K,     q2_K,    10,   256,  84,  REF,     REF,   K,      1,   1,   1)      \
    X(Q3_K,     q3_K,    11,   256, 110,  REF,     REF,   K,      1,   1,   1)      \
    X(Q4_K,     q4_K,    12,   256, 144,  AVX2,    REF,   K,      1,   1,   1)      \
    X(Q5_K,     q5_K,    13,   256, 176,  REF,     REF,   K,      1,   1,   1)      \
    X(Q6_K,     q6_K,    14,   256, 210,  AVX2,    REF,   K,      1,   1,   1)      \
    X(Q8_K,     q8_K,    15,   256, 292,  REF,     AVX2,  NONE,   0,   0,   0)      \
    X(IQ2_XXS,  iq2_xxs, 16,   256,  66,  REF,     NONE,  K,      0,   1,   0)      \
    X(IQ2_XS,   iq2_xs,  17,   256,  74,  REF,     NONE,  K,      0,   1,   0)      \
    X(IQ3_XXS,  iq3_xxs, 18,   256,  98,  REF,     NONE,  K,      0,   1,   0)      \
    X(IQ1_S,    iq1_s,   19,   256,  50,  REFUSED, NONE,  NONE,   0,   0,   0)      \
    X(IQ4_NL,   iq4_nl,  20,    32,  18,  REF,     NONE,  Q32,    1,   1,   1)      \
    X(IQ3_S,    iq3_s,   21,   256, 110,  REF,     NONE,  K,      0,   1,   0)      \
    X(IQ2_S,    iq2_s,   22,   256,  82,  REF,     NONE,  K,      0,   1,   0)      \
    X(IQ4_XS,   iq4_xs,  23,   256, 136,  REF,     NONE,  K,      1,   1,   1)      \
    X(I8,       i8,      24,     1,   1,  REF,     NONE,  NONE,   0,   0,   0)      \
    X(I16,      i16,     25,     1,   2,  REF,     NONE,  NONE,   0,   0,   0)      \
    X(I32,      i32,     26,     1,   4,  REF,     NONE,  NONE,   0,   0,   0)      \
    X(I64,      i64,     27,     1,   8,  REF,     NONE,  NONE,   0,   0,   0)      \
    X(F64,      f64,     28,     1,   8,  REF,     NONE,  NONE,   0,   0,   0)      \
    X(IQ1_M,    iq1_m,   29,   256,  56,  REFUSED, NONE,  NONE,   0,   0,   0)      \
    X(BF16,     bf16,    30,     1,   2,  REF,     REF,   FLOAT,  1,   1,   1)      \
    X(TQ1_0,    tq1_0,   34,   256,  54,  REF,     NONE,  K,      0,   1,   0)      \
    X(TQ2_0,    tq2_0,   35,   256,  66,  REF,     NONE,  K,      0,   1,   0)      \
    X(MXFP4,    mxfp4,   39,    32,  17,  REF,     REF,   Q32,    1,   1,   1)      \
    X(NVFP4,    nvfp4,   40,    64,  36,  REF,     NONE,  DEQ,    0,   0,   0)      \
    X(Q1_0,     q1_0,    41,   128,  18,  REF,     NONE,  DEQ,    0,   0,   0)
/* clang-format on */

/* ids of the table: LLAMAY_TYPE_F32, LLAMAY_TYPE_Q4_0, ... */
enum llamay_ggml_type {
#define LLAMAY_TYPE_ENUM(NAME, name, id, ...) LLAMAY_TYPE_##NAME = id,
    LLAMAY_GGML_TYPES(LLAMAY_TYPE_ENUM)
#undef LLAMAY_TYPE_ENUM
};

/* The matmul column as numbers, for tables (LLAMAY_MATMUL_##matmul). */
enum llamay_matmul_family {
    LLAMAY_MATMUL_NONE = 0,
    LLAMAY_MATMUL_FLOAT,
    LLAMAY_MATMUL_Q32,
    LLAMAY_MATMUL_K,
    LLAMAY_MATMUL_DEQ,
};

/* LLAMAY_IF_SET(flag)(code): code where flag (a 0/1 column, or a macro giving one) is 1,
   nothing where it is 0. */
#define LLAMAY_IF_SET(flag) LLAMAY_IF_SET_(flag)
#define LLAMAY_IF_SET_(flag) LLAMAY_IF_SET_##flag
#define LLAMAY_IF_SET_0(...)
#define LLAMAY_IF_SET_1(...) __VA_ARGS__

#endif
