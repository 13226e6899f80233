/* The machine's fp32 FMA rate on one thread: ten independent chains of 8-lane FMAs (enough to
   cover the latency of two FMA pipes), registers only. A kernel bound by its arithmetic, such as
   decode attention over an fp16 KV cache, cannot beat (multiply-adds) / (8 x this rate); on a
   virtual machine the figure may be half the CPU model's, when the host shares the core.

   Built for AVX-512 VNNI (-march=native on such a CPU) it also gives the rates of the integer
   instructions the AVX-512 K-quant kernels are made of (matmul_kx8.h): vpdpbusd (the products),
   vpdpwssd (the activation-sum terms), vpmulld (a sub-block's scale) and vpaddd, as twelve
   independent chains of zmm operations each. Where vpmulld runs at a fraction of vpdpbusd's
   rate, a kernel that scales every sub-block of every token pays for it; whether that is what
   bounds the kernel is for `bench/ab.py matmul` to say.

       cc -O2 -mavx2 -mfma bench/probes/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
       cc -O2 -march=native bench/probes/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak

   Prints the median of five timed rounds in G FMA/s (of 8 lanes) and G multiply-adds/s, then
   each integer instruction's in G/s. -DSTEPS=N shortens the run. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 5
#ifndef STEPS
#define STEPS 100000000L
#endif

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
/* twelve chains of OP(chain), kept in registers and live: the loop cannot be folded or dropped */
#define CHAINS(OP)                                                                              \
    OP(a0) OP(a1) OP(a2) OP(a3) OP(a4) OP(a5) OP(a6) OP(a7) OP(a8) OP(a9) OP(a10) OP(a11)      \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),          \
                     "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
#define DPBUSD(x) x = _mm512_dpbusd_epi32(x, u, s);
#define DPWSSD(x) x = _mm512_dpwssd_epi32(x, u, s);
#define MULLD(x) x = _mm512_mullo_epi32(x, u);
#define ADDD(x) x = _mm512_add_epi32(x, u);
#define RATE(NAME, OP)                                                                          \
    do {                                                                                        \
        double rate[ROUNDS];                                                                    \
        for (int round = 0; round < ROUNDS; round++) {                                          \
            const double start = seconds();                                                     \
            for (long i = 0; i < STEPS / 2; i++) {                                              \
                CHAINS(OP)                                                                      \
            }                                                                                   \
            rate[round] = 12.0 * (double)(STEPS / 2) / (seconds() - start) / 1e9;               \
        }                                                                                       \
        qsort(rate, ROUNDS, sizeof rate[0], by_value);                                          \
        printf("%-8s %.2f G/s\n", NAME, rate[ROUNDS / 2]);                                      \
    } while (0)

/* Returns 0, or 1 in the unlikely case that the chains' values sum to 42 (so they are live). */
static int integer_rates(void) {
    const __m512i u = _mm512_set1_epi32(0x01010101), s = _mm512_set1_epi32(0x00010001);
    __m512i a0 = u, a1 = s, a2 = u, a3 = s, a4 = u, a5 = s, a6 = u, a7 = s, a8 = u, a9 = s,
            a10 = u, a11 = s;
    printf("zmm instructions a second (one thread, median of %d):\n", ROUNDS);
    RATE("vpdpbusd", DPBUSD);
    RATE("vpdpwssd", DPWSSD);
    RATE("vpmulld", MULLD);
    RATE("vpaddd", ADDD);
    const __m512i all = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a10, a11));
    return _mm512_reduce_add_epi32(all) == 42;
}
#endif

int main(void) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0;
    double rate[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        const double start = seconds();
        for (long i = 0; i < STEPS; i++) {
#define STEP(x) x = _mm256_fmadd_ps(x, m, c);
            STEP(a0) STEP(a1) STEP(a2) STEP(a3) STEP(a4) STEP(a5) STEP(a6) STEP(a7) STEP(a8)
            STEP(a9)
#undef STEP
            /* keeps the chains in registers and live: the loop cannot be folded or dropped */
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5),
                             "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9));
        }
        rate[round] = 10.0 * (double)STEPS / (seconds() - start) / 1e9;
    }
    qsort(rate, ROUNDS, sizeof rate[0], by_value);
    printf("%.2f G FMA/s of 8 lanes, %.1f G multiply-adds/s (one thread, median of %d)\n",
           rate[ROUNDS / 2], 8.0 * rate[ROUNDS / 2], ROUNDS);
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
    return integer_rates();
#else
    return 0;
#endif
}
