/* The NEON kernel set against the reference, bit for bit, on random inputs from fixed seeds:
   vec16.h's operations, the forward step's kernels (kernels.h) and every matmul type at token
   and row counts that take each path of the tiling drivers. Built for aarch64 and run under
   qemu by tests/core/test_neon_qemu.py (or on an ARM machine):

       harness            every check; exit 0 where all hold, 1 with a line per mismatch

   It prints what it ran: "dotprod 1" where the CPU has the dot product instructions (both NEON
   builds of the matmul kernels are then checked, and the set must run the dotprod one), "dotprod
   0" where it lacks them (the set must run the plain build), then a line per group of checks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "fp16.h"
#include "kernel_set.h"
#include "kernels.h"
#include "matmul.h"
#include "matmul_kernels.h"
#include "quants.h"
#include "vec_ops.h"

/* ---- random numbers (splitmix64) ---- */

static uint64_t rng_state;

static void seed(uint64_t s) { rng_state = s; }

static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform(void) { return (float)((next_u64() >> 40) * (1.0 / 16777216.0)); }

/* roughly normal: the sum of four uniforms, centred */
static float normal(float scale) {
    return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f * scale;
}

static void *checked_alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- comparing ---- */

static long checks, failures;

static int same_bits(float a, float b) { return llamay_f32_bits(a) == llamay_f32_bits(b); }

/* got == want bit for bit, element by element; a line for the first mismatch */
static int compare(const char *what, const float *got, const float *want, size_t n) {
    checks += (long)n;
    for (size_t i = 0; i < n; i++) {
        if (!same_bits(got[i], want[i])) {
            failures++;
            printf("MISMATCH %s at %zu: %.9g (0x%08x), reference %.9g (0x%08x)\n", what, i,
                   got[i], llamay_f32_bits(got[i]), want[i], llamay_f32_bits(want[i]));
            return 0;
        }
    }
    return 1;
}

/* As compare, except that any NaN matches any NaN: an arithmetic operation's NaN payload is
   not part of the contract (the compiler may swap a sum's operands). */
static int compare_values(const char *what, const float *got, const float *want, size_t n) {
    checks += (long)n;
    for (size_t i = 0; i < n; i++) {
        if (!same_bits(got[i], want[i]) && !(isnan(got[i]) && isnan(want[i]))) {
            failures++;
            printf("MISMATCH %s at %zu: %.9g (0x%08x), reference %.9g (0x%08x)\n", what, i,
                   got[i], llamay_f32_bits(got[i]), want[i], llamay_f32_bits(want[i]));
            return 0;
        }
    }
    return 1;
}

static void expect(int condition, const char *what) {
    checks++;
    if (!condition) {
        failures++;
        printf("FAILED %s\n", what);
    }
}

/* ==== vec16.h ==== */

/* values every operation meets: signed zeros, infinities, NaNs (quiet and signalling, with
   payloads), subnormals, the extremes, and where exp and tanh change their ways */
static const uint32_t SPECIAL_BITS[] = {
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC01234,
    0x7F800001, 0xFFA00005, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
    0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x42B00000, 0xC2B00000, 0x42AEA000,
    0xC2AE999A, 0x3F200000, 0xBF200000, 0x41200000, 0xC1200000, 0x40E00000, 0x3F000000,
};
#define N_SPECIAL ((int)(sizeof SPECIAL_BITS / sizeof SPECIAL_BITS[0]))

static void check_vec16(void) {
    /* every pair of special values, then random ones over several magnitudes */
    const int n_pairs = N_SPECIAL * N_SPECIAL;
    const int n = (n_pairs + 4096 + 15) / 16 * 16;
    float *a = checked_alloc(n * 4), *b = checked_alloc(n * 4), *c = checked_alloc(n * 4);
    for (int i = 0; i < n; i++) {
        if (i < n_pairs) {
            a[i] = llamay_f32_from_bits(SPECIAL_BITS[i / N_SPECIAL]);
            b[i] = llamay_f32_from_bits(SPECIAL_BITS[i % N_SPECIAL]);
            c[i] = llamay_f32_from_bits(SPECIAL_BITS[(i * 7) % N_SPECIAL]);
        } else {
            const float scale = powf(10.0f, (float)(i % 9) - 4.0f);
            a[i] = normal(scale * 30.0f);
            b[i] = i % 13 == 0 ? a[i] : normal(scale);
            c[i] = normal(scale);
        }
    }
    float *ref = checked_alloc((size_t)VEC_OPS_COUNT * n * 4);
    float *neon = checked_alloc((size_t)VEC_OPS_COUNT * n * 4);
    vec_ops_ref(a, b, c, n, ref);
    vec_ops_neon(a, b, c, n, neon);
    static const char *const names[VEC_OPS_COUNT] = {
        "v16_add", "v16_sub", "v16_mul", "v16_div", "v16_fma", "v16_max",
        "v16_min", "v16_abs", "v16_copysign", "v16_select", "v16_exp", "v16_tanh"};
    int ok = 1;
    for (int op = 0; op < VEC_OPS_COUNT; op++) {
        /* the arithmetic ones may differ in a NaN's payload; the others move bits and must not */
        const int moves_bits = op == VEC_OP_MAX || op == VEC_OP_MIN || op == VEC_OP_ABS ||
                               op == VEC_OP_COPYSIGN || op == VEC_OP_SELECT_LT;
        ok &= moves_bits ? compare(names[op], neon + (size_t)op * n, ref + (size_t)op * n, n)
                         : compare_values(names[op], neon + (size_t)op * n,
                                          ref + (size_t)op * n, n);
    }

    /* 2^n for every integer n in [-127, 127] */
    float exps[256], exp_ref[256], exp_neon[256];
    for (int i = 0; i < 256; i++) {
        exps[i] = (float)(i < 255 ? i - 127 : 0);
    }
    vec_exp2i_ref(exps, 256, exp_ref);
    vec_exp2i_neon(exps, 256, exp_neon);
    ok &= compare("v16_exp2i", exp_neon, exp_ref, 256);

    /* every fp16 value, NaNs included, and every int8 */
    uint16_t *halves = checked_alloc(65536 * 2);
    int8_t *bytes = checked_alloc(65536);
    for (int i = 0; i < 65536; i++) {
        halves[i] = (uint16_t)i;
        bytes[i] = (int8_t)(i & 0xFF);
    }
    float *h_ref = checked_alloc(65536 * 4), *h_neon = checked_alloc(65536 * 4);
    float *b_ref = checked_alloc(65536 * 4), *b_neon = checked_alloc(65536 * 4);
    vec_loads_ref(halves, bytes, 65536, h_ref, b_ref);
    vec_loads_neon(halves, bytes, 65536, h_neon, b_neon);
    float scalar[65536];
    for (int i = 0; i < 65536; i++) {
        scalar[i] = llamay_fp16_to_fp32_scalar((uint16_t)i);
    }
    ok &= compare("v16_load_f16 (against llamay_fp16_to_fp32_scalar)", h_neon, scalar, 65536);
    ok &= compare("v16_load_f16", h_neon, h_ref, 65536);
    ok &= compare("v16_load_i8", b_neon, b_ref, 65536);

    float p_ref[17 * 16], p_neon[17 * 16];
    for (int i = 0; i < 17 * 16; i++) {
        p_ref[i] = p_neon[i] = -1.5f;
    }
    vec_partial_ref(a + n_pairs, p_ref);
    vec_partial_neon(a + n_pairs, p_neon);
    ok &= compare("v16_load_partial / v16_store_partial", p_neon, p_ref, 17 * 16);

    /* the trees over random lanes (the max's ties of +0 and -0 aside: see vec16.h) */
    const int m = 4096;
    float *tree_ref = checked_alloc(m / 16 * 4), *tree_neon = checked_alloc(m / 16 * 4);
    float *max_ref = checked_alloc(m / 16 * 4), *max_neon = checked_alloc(m / 16 * 4);
    float *t8_ref = checked_alloc(m / 16 * 4), *t8_neon = checked_alloc(m / 16 * 4);
    vec_reduce_ref(a + n_pairs, m, tree_ref, max_ref, t8_ref);
    vec_reduce_neon(a + n_pairs, m, tree_neon, max_neon, t8_neon);
    ok &= compare("v16_tree", tree_neon, tree_ref, m / 16);
    ok &= compare("v16_hmax", max_neon, max_ref, m / 16);
    ok &= compare("v16_tree8_first / v16_tree8_rest", t8_neon, t8_ref, m / 16);
    printf("vec16 %s\n", ok ? "ok" : "FAILED");
    free(a), free(b), free(c), free(ref), free(neon), free(halves), free(bytes);
    free(h_ref), free(h_neon), free(b_ref), free(b_neon);
    free(tree_ref), free(tree_neon), free(max_ref), free(max_neon), free(t8_ref), free(t8_neon);
}

/* ==== the forward step's kernels ==== */

static void random_values(float *x, int n, float scale) {
    for (int i = 0; i < n; i++) {
        x[i] = normal(scale);
    }
}

static void check_elementwise(const llamay_kernels *ref, const llamay_kernels *neon) {
    static const int sizes[] = {1, 15, 16, 17, 640, 1001};
    int ok = 1;
    char what[96];
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        const int wide_n = n + 5;
        float *x = checked_alloc(n * 4), *w = checked_alloc(n * 4), *up = checked_alloc(n * 4);
        float *wide = checked_alloc(wide_n * 4), *ones = checked_alloc(wide_n * 4);
        float *got = checked_alloc(wide_n * 4), *want = checked_alloc(wide_n * 4);
        random_values(x, n, 3.0f);
        random_values(w, n, 1.0f);
        random_values(up, n, 1.0f);
        random_values(wide, n, 30.0f);
        const float extremes[5] = {0.0f, -0.0f, 88.5f, -88.5f, 1e-30f};
        memcpy(wide + n, extremes, sizeof extremes);
        for (int i = 0; i < wide_n; i++) {
            ones[i] = 1.0f;
        }
        for (int with_weight = 0; with_weight < 2; with_weight++) {
            const float *weight = with_weight ? w : NULL;
            const float eps = with_weight ? 1e-6f : 1e-5f;
            ref->rms_norm(x, weight, n, eps, want);
            neon->rms_norm(x, weight, n, eps, got);
            snprintf(what, sizeof what, "rms_norm n=%d weight=%d", n, with_weight);
            ok &= compare(what, got, want, n);
            ref->layer_norm(x, weight, n, eps, want);
            neon->layer_norm(x, weight, n, eps, got);
            snprintf(what, sizeof what, "layer_norm n=%d weight=%d", n, with_weight);
            ok &= compare(what, got, want, n);
        }
        static const char *const acts[3] = {"silu", "gelu_tanh", "swiglu_oai"};
        for (int act = 0; act < 3; act++) {
            ref->gated(act, wide, ones, wide_n, want);
            neon->gated(act, wide, ones, wide_n, got);
            snprintf(what, sizeof what, "gated %s (wide) n=%d", acts[act], wide_n);
            ok &= compare(what, got, want, wide_n);
            ref->gated(act, x, up, n, want);
            neon->gated(act, x, up, n, got);
            snprintf(what, sizeof what, "gated %s n=%d", acts[act], n);
            ok &= compare(what, got, want, n);
            if (act != 2) { /* a plain FFN's act(x): GELU through its fp16 table */
                ref->gated(act, wide, NULL, wide_n, want);
                neon->gated(act, wide, NULL, wide_n, got);
                snprintf(what, sizeof what, "gated %s without up n=%d", acts[act], wide_n);
                ok &= compare(what, got, want, wide_n);
            }
        }
        memcpy(want, wide, wide_n * 4);
        memcpy(got, wide, wide_n * 4);
        ref->softcap(want, wide_n, 15.0f);
        neon->softcap(got, wide_n, 15.0f);
        snprintf(what, sizeof what, "softcap n=%d", wide_n);
        ok &= compare(what, got, want, wide_n);
        float lse_ref[2], lse_neon[2];
        ref->logsumexp(x, n, &lse_ref[0], &lse_ref[1]);
        neon->logsumexp(x, n, &lse_neon[0], &lse_neon[1]);
        snprintf(what, sizeof what, "logsumexp n=%d", n);
        ok &= compare(what, lse_neon, lse_ref, 2);
        free(x), free(w), free(up), free(wide), free(ones), free(got), free(want);
    }
    printf("norms, activations, softcap, logsumexp %s\n", ok ? "ok" : "FAILED");
}

/* A KV arena of n_pages pages (two layers, two KV heads, groups of four pages), K and V random:
   fp32, fp16, or rows of Q8_0 blocks quantized by the reference. */
static llamay_pages make_pages(int type, int head_dim, int page_tokens, int n_pages) {
    llamay_pages kv = {0};
    const int64_t elem = type == LLAMAY_KV_F32 ? 4 : 2;
    kv.row_bytes = type == LLAMAY_KV_Q8_0 ? head_dim / 32 * 34 : head_dim * elem;
    kv.head_bytes = page_tokens * kv.row_bytes;
    kv.n_layers = 2;
    kv.n_kv_heads = 2;
    kv.page_bytes = (int64_t)kv.n_layers * 2 * kv.n_kv_heads * kv.head_bytes;
    kv.group_pages = 4;
    kv.group_bytes = kv.group_pages * kv.page_bytes;
    kv.n_pages = n_pages;
    kv.head_dim = head_dim;
    kv.page_tokens = page_tokens;
    kv.type = type;
    const int64_t groups = (n_pages + kv.group_pages - 1) / kv.group_pages;
    kv.base = checked_alloc((size_t)(groups * kv.group_bytes));
    const int64_t rows = groups * kv.group_bytes / kv.row_bytes;
    float *x = checked_alloc((size_t)head_dim * 4);
    for (int64_t r = 0; r < rows; r++) {
        unsigned char *row = kv.base + r * kv.row_bytes;
        random_values(x, head_dim, 1.0f);
        if (type == LLAMAY_KV_F32) {
            memcpy(row, x, (size_t)head_dim * 4);
        } else if (type == LLAMAY_KV_F16) {
            for (int i = 0; i < head_dim; i++) {
                const uint16_t h = llamay_fp32_to_fp16_scalar(x[i]);
                memcpy(row + 2 * i, &h, 2);
            }
        } else {
            llamay_quantize_row_q8_0_ref(x, row, head_dim);
        }
    }
    free(x);
    return kv;
}

typedef struct {
    int n_q, pos, window;
    float softcap;
} attention_case;

/* One attention case in every way the engine runs it: whole, and span by span merged. */
static int check_attention_case(const llamay_kernels *ref, const llamay_kernels *neon,
                                const llamay_pages *kv, const int32_t *pages,
                                const attention_case *c, int with_sinks, const char *label) {
    const int D = kv->head_dim, n_q = c->n_q;
    float *q = checked_alloc((size_t)n_q * D * 4), sinks[16];
    random_values(q, n_q * D, 2.0f);
    random_values(sinks, 16, 2.0f);
    float *want = checked_alloc((size_t)n_q * D * 4), *got = checked_alloc((size_t)n_q * D * 4);
    llamay_attention a = {kv, pages, 1, 1, n_q, c->pos, c->window, 0.3f, c->softcap,
                          with_sinks ? sinks : NULL, q, want, NULL, NULL, 0};
    ref->attention(&a);
    a.out = got;
    neon->attention(&a);
    char what[160];
    snprintf(what, sizeof what, "attention %s n_q=%d pos=%d window=%d softcap=%g sinks=%d",
             label, n_q, c->pos, c->window, c->softcap, with_sinks);
    int ok = compare(what, got, want, (size_t)n_q * D);
    /* span by span, each state apart, then merged */
    int first, last;
    llamay_attention_spans(c->pos, c->window, kv->page_tokens, &first, &last);
    const size_t stride = 2 * (size_t)n_q + (size_t)n_q * D;
    float *spans = checked_alloc((last - first + 1) * stride * 4);
    for (int s = first; s <= last; s++) {
        float *span = spans + (size_t)(s - first) * stride;
        a.span = s;
        a.span_max = span;
        a.span_sum = span + n_q;
        a.out = span + 2 * n_q;
        neon->attention(&a);
    }
    neon->attention_merge(last - first + 1, n_q, D, spans, stride, got);
    strncat(what, " by spans", sizeof what - strlen(what) - 1);
    ok &= compare(what, got, want, (size_t)n_q * D);
    free(q), free(want), free(got), free(spans);
    return ok;
}

static void check_attention(const llamay_kernels *ref, const llamay_kernels *neon) {
    static const char *const type_names[3] = {"F32", "F16", "Q8_0"};
    /* head_dim 96 leaves a part-filled group of chunks; pages of 16 to 64 positions */
    static const int shapes[][2] = {{32, 16}, {96, 64}, {128, 32}, {256, 16}, {64, 48}};
    int ok = 1;
    for (int type = 0; type < 3; type++) {
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const int D = shapes[k][0], P = shapes[k][1];
            /* past 256 positions: several spans of their own softmax, folded */
            const int n_pages = 1300 / P + 1;
            llamay_pages kv = make_pages(type, D, P, n_pages);
            int32_t *pages = checked_alloc((size_t)n_pages * 4);
            for (int i = 0; i < n_pages; i++) { /* pages in an order of their own */
                pages[i] = i;
            }
            for (int i = n_pages - 1; i > 0; i--) {
                const int j = (int)(next_u64() % (uint64_t)(i + 1));
                const int32_t swap = pages[i];
                pages[i] = pages[j];
                pages[j] = swap;
            }
            const int last = n_pages * P - 1;
            const attention_case cases[] = {
                {1, 0, 0, 0.0f},     {4, 37, 0, 0.0f},           {10, 63, 20, 0.0f},
                {3, 50, 0, 30.0f},   {2, 17, 5, 50.0f},          {8, last, 0, 0.0f},
                {7, last - 3, 3 * P + 5, 0.0f}, {5, 700, 0, 0.0f}, {6, 1100, 600, 30.0f},
                {16, 530, 40, 0.0f}, {1, 511, 0, 0.0f},          {6, 1024, 1000, 20.0f},
            };
            char label[64];
            snprintf(label, sizeof label, "%s head_dim=%d page=%d", type_names[type], D, P);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                for (int with_sinks = 0; with_sinks < 2; with_sinks++) {
                    ok &= check_attention_case(ref, neon, &kv, pages, &cases[i], with_sinks,
                                               label);
                }
            }
            free(kv.base);
            free(pages);
        }
    }
    printf("attention %s\n", ok ? "ok" : "FAILED");
}

/* ==== matmul ==== */

/* Byte offsets of each block's fp16 scales (set to sane values in random weights): d, then
   dmin where there is one (positive, as ggml's quantizers make it). */
static void half_scales(int type, int *offsets, int *count) {
    *count = 1;
    switch (type) {
    case LLAMAY_TYPE_Q4_1:
    case LLAMAY_TYPE_Q5_1:
    case LLAMAY_TYPE_Q4_K:
    case LLAMAY_TYPE_Q5_K: offsets[0] = 0, offsets[1] = 2, *count = 2; break;
    case LLAMAY_TYPE_Q2_K: offsets[0] = 80, offsets[1] = 82, *count = 2; break;
    case LLAMAY_TYPE_Q3_K: offsets[0] = 108; break;
    case LLAMAY_TYPE_Q6_K: offsets[0] = 208; break;
    case LLAMAY_TYPE_MXFP4: *count = 0; break;
    default: offsets[0] = 0; break;
    }
}

/* The bytes of a random n_rows x n_cols matrix of `type`, with sane scales */
static uint8_t *random_weights(int type, int n_rows, int n_cols) {
    const llamay_quant_type *t = llamay_quant_type_of(type);
    const size_t n_blocks = (size_t)n_rows * n_cols / t->block_elems;
    uint8_t *w = checked_alloc(n_blocks * t->block_bytes);
    if (t->matmul == LLAMAY_MATMUL_FLOAT) {
        for (size_t i = 0; i < n_blocks; i++) {
            const float v = normal(1.0f);
            if (type == LLAMAY_TYPE_F32) {
                memcpy(w + 4 * i, &v, 4);
            } else {
                const uint16_t h = type == LLAMAY_TYPE_F16 ? llamay_fp32_to_fp16_scalar(v)
                                                           : (uint16_t)(llamay_f32_bits(v) >> 16);
                memcpy(w + 2 * i, &h, 2);
            }
        }
        return w;
    }
    for (size_t i = 0; i < n_blocks * t->block_bytes; i++) {
        w[i] = (uint8_t)next_u64();
    }
    int offsets[2], count;
    half_scales(type, offsets, &count);
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t *block = w + b * t->block_bytes;
        for (int k = 0; k < count; k++) {
            const float magnitude = 0.001f + 0.009f * uniform();
            const float scale = k == 1 || next_u64() % 2 ? magnitude : -magnitude;
            const uint16_t h = llamay_fp32_to_fp16_scalar(scale);
            memcpy(block + offsets[k], &h, 2);
        }
        if (type == LLAMAY_TYPE_MXFP4) { /* E8M0: mostly near 2^-5, now and then subnormal */
            block[0] = (uint8_t)(next_u64() % 8 == 0 ? next_u64() % 3 : 119 + next_u64() % 6);
        }
    }
    return w;
}

typedef struct {
    const char *name;
    int type;
} named_type;

static const named_type MATMUL_TYPES[] = {
    {"F32", LLAMAY_TYPE_F32},       {"F16", LLAMAY_TYPE_F16},       {"BF16", LLAMAY_TYPE_BF16},
    {"Q4_0", LLAMAY_TYPE_Q4_0},     {"Q4_1", LLAMAY_TYPE_Q4_1},     {"Q5_0", LLAMAY_TYPE_Q5_0},
    {"Q5_1", LLAMAY_TYPE_Q5_1},     {"Q8_0", LLAMAY_TYPE_Q8_0},     {"IQ4_NL", LLAMAY_TYPE_IQ4_NL},
    {"MXFP4", LLAMAY_TYPE_MXFP4},   {"Q2_K", LLAMAY_TYPE_Q2_K},     {"Q3_K", LLAMAY_TYPE_Q3_K},
    {"Q4_K", LLAMAY_TYPE_Q4_K},     {"Q5_K", LLAMAY_TYPE_Q5_K},     {"Q6_K", LLAMAY_TYPE_Q6_K},
    {"IQ4_XS", LLAMAY_TYPE_IQ4_XS},
};
/* types the NEON set runs through the reference's kernel */
static const named_type FALLBACK_TYPES[] = {
    {"IQ2_XXS", LLAMAY_TYPE_IQ2_XXS}, {"IQ2_XS", LLAMAY_TYPE_IQ2_XS},
    {"IQ2_S", LLAMAY_TYPE_IQ2_S},     {"IQ3_XXS", LLAMAY_TYPE_IQ3_XXS},
    {"IQ3_S", LLAMAY_TYPE_IQ3_S},     {"TQ1_0", LLAMAY_TYPE_TQ1_0},
    {"TQ2_0", LLAMAY_TYPE_TQ2_0},     {"NVFP4", LLAMAY_TYPE_NVFP4},
    {"Q1_0", LLAMAY_TYPE_Q1_0},
};

/* Token counts: one (decode), a few (2-16: a drafted or batched step), past a KX8 pass of
   eight, past the direct KX8 path (17: expanded super-blocks), and past a chunk of 64 (67: a
   chunk of 64 expanded, then 3 direct). */
static const int TOKENS[] = {1, 2, 3, 8, 9, 16, 17, 64, 67};
#define MAX_TOKENS 67

/* Columns per family: for the packed formats, rows whose last group holds 1, 7, 5, 1 and 4
   blocks (32, 224, 160, 288, 640 columns); 2304 columns are nine super-blocks, past lane 8. */
static int columns_of(int family, int k) {
    static const int float_cols[] = {17, 640, 48};
    static const int q32_cols[] = {32, 224, 160, 288, 640};
    static const int k_cols[] = {256, 2304};
    switch (family) {
    case LLAMAY_MATMUL_FLOAT: return k < 3 ? float_cols[k] : 0;
    case LLAMAY_MATMUL_Q32: return k < 5 ? q32_cols[k] : 0;
    default: return k < 2 ? k_cols[k] : 0;
    }
}

/* Rows: a part-filled KX8 group and block of sixteen rows (37), a lone part group (5), and
   whole ones (16) */
static const int ROWS[] = {37, 5, 16};

/* out of `kernel` for every token count, and for rows split at a multiple of 16 (as threads
   split them), against the reference's `want` (MAX_TOKENS x n_rows) */
static int check_kernel(const char *label, llamay_weight *w, llamay_matmul_fn kernel,
                        const uint8_t *act, const float *want) {
    const int n_rows = w->n_rows;
    float *got = checked_alloc((size_t)MAX_TOKENS * n_rows * 4);
    w->kernel = kernel;
    int ok = 1;
    char what[160];
    for (size_t k = 0; k < sizeof TOKENS / sizeof TOKENS[0]; k++) {
        const int T = TOKENS[k];
        memset(got, 0xFF, (size_t)T * n_rows * 4);
        llamay_matmul(w, act, T, got, 0, n_rows);
        snprintf(what, sizeof what, "%s tokens=%d", label, T);
        ok &= compare(what, got, want, (size_t)T * n_rows);
    }
    if (n_rows > 16) {
        memset(got, 0xFF, (size_t)9 * n_rows * 4);
        llamay_matmul(w, act, 9, got, 16, n_rows);
        llamay_matmul(w, act, 9, got, 0, 16);
        snprintf(what, sizeof what, "%s tokens=9 rows split at 16", label);
        ok &= compare(what, got, want, (size_t)9 * n_rows);
    }
    free(got);
    return ok;
}

static void check_matmul_type(const named_type *t, int dotprod) {
    const llamay_quant_type *q = llamay_quant_type_of(t->type);
    const llamay_matmul_fn plain = llamay_neon_plain_kernel(t->type);
    const llamay_matmul_fn with_dot = llamay_neon_dotprod_kernel(t->type);
    char what[160];
    snprintf(what, sizeof what, "%s has NEON kernels with and without the dot product", t->name);
    expect(plain != NULL && with_dot != NULL &&
               llamay_kernel_set_has_simd(LLAMAY_KERNELS_NEON, t->type),
           what);
    int ok = 1, shapes = 0;
    for (int ci = 0; columns_of(q->matmul, ci) != 0; ci++) {
        for (size_t ri = 0; ri < sizeof ROWS / sizeof ROWS[0]; ri++) {
            const int n_rows = ROWS[ri], n_cols = columns_of(q->matmul, ci);
            seed(0x5EED0000u + (uint64_t)t->type * 1000 + (uint64_t)ci * 10 + ri);
            uint8_t *data = random_weights(t->type, n_rows, n_cols);
            llamay_weight wr, wn;
            expect(llamay_weight_init(&wr, data, t->type, n_rows, n_cols,
                                      LLAMAY_KERNELS_REFERENCE) == 0,
                   "reference weight");
            expect(llamay_weight_init(&wn, data, t->type, n_rows, n_cols, LLAMAY_KERNELS_NEON) == 0,
                   "NEON weight");
            snprintf(what, sizeof what, "%s: the NEON set runs the %s build", t->name,
                     dotprod ? "dotprod" : "plain");
            expect(wn.kernel == (dotprod ? with_dot : plain), what);
            uint8_t *packed = NULL;
            if (llamay_packed_bytes(&wn) > 0) {
                packed = checked_alloc(llamay_packed_bytes(&wn));
                /* in two parts, as threads split it */
                const int split = n_rows / 16 * 8;
                llamay_weight_pack(&wn, packed, 0, split);
                llamay_weight_pack(&wn, packed, split, n_rows);
                wn.packed = packed;
            }
            float *x = checked_alloc((size_t)MAX_TOKENS * n_cols * 4);
            for (int i = 0; i < MAX_TOKENS * n_cols; i++) {
                x[i] = normal(i % 97 == 0 ? 20.0f : 1.0f);
            }
            uint8_t *act_ref = checked_alloc((size_t)MAX_TOKENS * wr.act_row_bytes);
            uint8_t *act_neon = checked_alloc((size_t)MAX_TOKENS * wn.act_row_bytes);
            llamay_quantize_activations(&wr, x, 0, MAX_TOKENS, act_ref);
            llamay_quantize_activations(&wn, x, 0, MAX_TOKENS, act_neon);
            float *want = checked_alloc((size_t)MAX_TOKENS * n_rows * 4);
            llamay_matmul(&wr, act_ref, MAX_TOKENS, want, 0, n_rows);
            char label[128];
            snprintf(label, sizeof label, "matmul %s %dx%d plain", t->name, n_rows, n_cols);
            ok &= check_kernel(label, &wn, plain, act_neon, want);
            if (dotprod) {
                snprintf(label, sizeof label, "matmul %s %dx%d dotprod", t->name, n_rows, n_cols);
                ok &= check_kernel(label, &wn, with_dot, act_neon, want);
            }
            shapes++;
            free(data), free(packed), free(x), free(act_ref), free(act_neon), free(want);
        }
    }
    printf("matmul %s %s (%d shapes, %s)\n", t->name, ok ? "ok" : "FAILED", shapes,
           dotprod ? "plain and dotprod builds" : "plain build");
}

/* A type without a NEON kernel takes the reference's, with the reference's activations. */
static void check_fallback_type(const named_type *t) {
    const llamay_quant_type *q = llamay_quant_type_of(t->type);
    const int n_rows = 5, n_cols = q->block_elems == 256 ? 256 : 5 * q->block_elems;
    uint8_t *data = checked_alloc((size_t)n_rows * n_cols / q->block_elems * q->block_bytes);
    llamay_weight wn;
    char what[128];
    snprintf(what, sizeof what, "%s falls back to the reference kernel", t->name);
    expect(llamay_weight_init(&wn, data, t->type, n_rows, n_cols, LLAMAY_KERNELS_NEON) == 0 &&
               wn.kernel == llamay_reference_kernel(t->type) && wn.packed_row_bytes == 0 &&
               !llamay_kernel_set_has_simd(LLAMAY_KERNELS_NEON, t->type),
           what);
    free(data);
}

int main(void) {
    const int dotprod = llamay_cpu_has_dotprod();
    printf("dotprod %d\n", dotprod);
    expect(llamay_kernel_set_runs(LLAMAY_KERNELS_NEON), "the NEON set runs here");
    expect(llamay_kernel_set_best() == LLAMAY_KERNELS_NEON, "NEON is the best set here");
    seed(7);
    check_vec16();
    const llamay_kernels *ref = llamay_kernels_of(LLAMAY_KERNELS_REFERENCE);
    const llamay_kernels *neon = llamay_kernels_of(LLAMAY_KERNELS_NEON);
    expect(neon != NULL && neon->set == LLAMAY_KERNELS_NEON, "the NEON kernels table");
    if (neon != NULL) {
        seed(11);
        check_elementwise(ref, neon);
        seed(13);
        check_attention(ref, neon);
    }
    for (size_t i = 0; i < sizeof MATMUL_TYPES / sizeof MATMUL_TYPES[0]; i++) {
        check_matmul_type(&MATMUL_TYPES[i], dotprod);
    }
    for (size_t i = 0; i < sizeof FALLBACK_TYPES / sizeof FALLBACK_TYPES[0]; i++) {
        check_fallback_type(&FALLBACK_TYPES[i]);
    }
    printf("%s: %ld values compared, %ld mismatches\n", failures ? "FAILED" : "ok", checks,
           failures);
    return failures ? 1 : 0;
}
