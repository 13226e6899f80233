/* Quantized matrix multiplication: out[t][r] = dot(weight row r, activation row t).

   The contract is determinism: every output element is a function of its weight row and its
   activation row only, never of the thread count, the tile shape or the number of tokens in the
   batch, and every kernel set (the scalar reference, AVX2, AVX-512, NEON) gives the same bits.

   How an output is computed (the canonical order; matmul_ref.c is it, in plain C):
   - Activations are quantized once per token, with the quantizer ggml pairs with the weight
     type: Q8_0 for the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) and
     Q8_K for the 256-element ones (Q2_K..Q6_K, IQ2_*, IQ3_*, IQ4_XS, TQ1_0, TQ2_0). Q4_1 and
     Q5_1 use Q8_0 too, not ggml's Q8_1: the min term needs the activation block's sum, which
     we keep exact as an integer instead of Q8_1's fp16-rounded d*sum.
   - Each weight block b yields one or two exact integer dot products i_k (int32, never
     saturated) and fp32 scales s_k (a product of the weight's and the activation's scales, in
     a fixed order per type). They go into lane b % 8 of eight fp32 accumulators, starting at
     +0: acc[b % 8] = fmaf(s_1, (float)i_1, acc[b % 8]), then the same for (s_2, i_2).
   - The output is the fixed tree acc sum ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
   - F32, F16 and BF16 weights take fp32 activations as they are: element i goes into lane
     i % 16 of sixteen accumulators, acc = fmaf(w_i, x_i, acc), then the tree over 16 lanes
     (lane i + lane i+8, then the tree over 8). Types without an integer kernel (NVFP4, Q1_0)
     are dequantized row by row and take the same fp32 path.

   Threads split weight rows only: llamay_matmul computes a slice of rows for all tokens and is
   meant to be called by each thread of the caller's parallel region (threads.h) on its own
   slice. */
#ifndef LLAMAY_MATMUL_H
#define LLAMAY_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernel_set.h" /* enum llamay_kernel_set */

/* How a weight wants its activations quantized (matmul_kernels.h has the byte layouts). */
enum llamay_act_kind {
    LLAMAY_ACT_F32 = 0,     /* float x[n_cols] */
    LLAMAY_ACT_Q8_0 = 1,    /* int8 qs[n_cols] | float d[n_cols/32] | int16 sum[n_cols/32] */
    LLAMAY_ACT_Q8_0_X8 = 2, /* the same, quants interleaved as the packed weights' (below) */
    LLAMAY_ACT_Q8_K = 3,    /* int8 qs[n_cols] | float d[n_cols/256] | int16 sum[n_cols/16] */
};

struct llamay_weight;

/* Computes out[t * out_stride + r] for r in [row_begin, row_end) and t in [0, n_tokens). */
typedef void (*llamay_matmul_fn)(const struct llamay_weight *w, const uint8_t *act,
                                 int n_tokens, float *out, size_t out_stride, int row_begin,
                                 int row_end);

typedef struct llamay_weight {
    const uint8_t *data; /* n_rows rows, row_bytes apart, in the ggml block layout */
    int type;            /* ggml type id */
    int n_rows;          /* outputs */
    int n_cols;          /* inputs: a multiple of the type's block size */
    size_t row_bytes;
    /* The SIMD kernels of the 32-element formats read a packed copy instead: each group of
       eight blocks (the last holds the rest) with its scales together and its quants
       interleaved four bytes at a time (matmul_kernels.h), so that a 32-bit SIMD lane holds
       one block. The SIMD kernels of Q2_K..Q6_K and IQ4_XS read a copy with eight rows
       interleaved (KX8, matmul_kernels.h). packed_row_bytes is 0 where the kernels read
       `data`, else the bytes of one row in the packed copy; the caller provides
       llamay_packed_bytes(w) bytes, fills them with llamay_weight_pack and sets `packed`. */
    size_t packed_row_bytes;
    const uint8_t *packed;
    int act_kind;         /* enum llamay_act_kind */
    size_t act_row_bytes; /* bytes per token of quantized activations (a multiple of 64) */
    llamay_matmul_fn kernel;
    int kernel_set; /* whose kernels: the matmul's, and the quantizer of its activations */
} llamay_weight;

/* The fastest kernel set that runs on this CPU (kernel_set.h). */
int llamay_best_kernel_set(void);
/* 1 if `set` is compiled into this build and runs on this CPU (kernel_set.h). */
int llamay_kernel_set_available(int set);
/* 1 if `set` has a SIMD kernel for `type` (0 where it uses the reference: same bits, slower). */
int llamay_kernel_set_has_simd(int set, int type);

/* Fills w for a weight matrix. Returns 0, or -1 when the type has no matmul (e.g. I32) or
   n_cols is not a multiple of its block size, or -2 when `set` does not run here. */
int llamay_weight_init(llamay_weight *w, const void *data, int type, int n_rows, int n_cols,
                       int set);

/* The bytes of w's packed copy (0 where its kernels read `data`). */
size_t llamay_packed_bytes(const llamay_weight *w);

/* Writes rows [row_begin, row_end) of w->data, packed, into `packed` (the whole matrix's
   buffer, 64-byte aligned for speed); threads may split the rows, and each row writes only
   its own bytes (the rows a last KX8 group lacks are zeroed with its last row). */
void llamay_weight_pack(const llamay_weight *w, uint8_t *packed, int row_begin, int row_end);

/* The calling thread's scratch for the kernels that need more than their stack (the KX8
   kernel's expanded super-blocks, matmul_kx8.h): `bytes` or more, 64-byte aligned, grown when a
   call asks for more and kept for the thread's next call; NULL where the memory cannot be had.
   It is freed when the thread ends, or by llamay_matmul_release_scratch. */
void *llamay_matmul_scratch(size_t bytes);

/* Frees the scratch of the calling thread and of every worker of the pool (threads.h), in a
   region of its own: for a model's close, so that an idle process keeps none. */
void llamay_matmul_release_scratch(void);

/* Quantizes tokens [tok_begin, tok_end) of x (rows of w->n_cols floats) into act, whose rows
   are w->act_row_bytes apart. Threads may split the tokens. Weights with the same act_kind and
   n_cols take the same activations (say Q, K and V): quantize once, multiply by each. */
void llamay_quantize_activations(const llamay_weight *w, const float *x, int tok_begin,
                                 int tok_end, uint8_t *act);

/* Rows [row_begin, row_end) of out (n_tokens rows of w->n_rows floats). Any split of the rows
   between calls or threads gives the same bits. */
void llamay_matmul(const llamay_weight *w, const uint8_t *act, int n_tokens, float *out,
                   int row_begin, int row_end);

/* One product for llamay_matmul_parallel; act holds n_tokens * w->act_row_bytes bytes (64-byte
   aligned for speed), out n_tokens * w->n_rows floats. */
typedef struct {
    const llamay_weight *w;
    const float *x;
    uint8_t *act;
    float *out;
} llamay_matmul_job;

/* For tests and benchmarks, the pattern of a forward step: one parallel region of n_threads
   (0: the default) runs the jobs one after another, `repeats` times, each job quantizing its
   activations (threads split tokens), a barrier, multiplying (threads split rows), a barrier. */
void llamay_matmul_parallel(const llamay_matmul_job *jobs, int n_jobs, int n_tokens, int repeats,
                            int n_threads);

/* For tests, the stage barrier (barrier.h) under load: n_threads threads pass `rounds` pairs of
   barriers, each writing the round into its slot before the first and reading every slot
   between them; every `sleep_every` rounds (0: never) one thread sleeps a millisecond before
   arriving, past the others' spin, so that they sleep too. Returns the slots read that held
   another round (0 where the barrier holds). */
int llamay_barrier_check(int n_threads, int rounds, int sleep_every);

#endif
