/* The machine's fp32 FMA rate on one thread: ten independent chains of 8-lane FMAs (enough to
   cover the latency of two FMA pipes), registers only. A kernel bound by its arithmetic, such as
   decode attention over an fp16 KV cache, cannot beat (multiply-adds) / (8 x this rate); on a
   virtual machine the figure may be half the CPU model's, when the host shares the core.

       cc -O2 -mavx2 -mfma bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak

   Prints the median of five timed rounds in G FMA/s (of 8 lanes) and G multiply-adds/s. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 5
#define STEPS 100000000L

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

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
    return 0;
}
