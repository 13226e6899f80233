/* The machine's streaming read bandwidth: threads reading their share of 1 GiB in order, four
   vector loads a step XORed together, nothing else (no software prefetch: the hardware's own).
   A decode step reads each weight byte once, so a step of W bytes cannot take less than
   W / this rate; docs/performance.md gives decode's GB/s against it.

       cc -O2 -march=native -fopenmp bench/probes/read_bandwidth.c -o /tmp/read_bandwidth
       /tmp/read_bandwidth

   Prints, for 1 to the number of cores threads, the best of five rounds in GB/s. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)1 << 30)
#define ROUNDS 5

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* XOR of every vector of [p, p + n), n a multiple of 256: four loads a step, 64 bytes each
   with AVX-512 (which read faster than 32-byte loads on the Xeon measured: 15.6 GB/s from one
   thread against 11.6), 32 otherwise */
static uint64_t read_all(const uint8_t *p, size_t n) {
#ifdef __AVX512F__
    __m512i x = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 256) {
        const __m512i a = _mm512_xor_si512(_mm512_load_si512(p + i), _mm512_load_si512(p + i + 64));
        const __m512i b =
            _mm512_xor_si512(_mm512_load_si512(p + i + 128), _mm512_load_si512(p + i + 192));
        x = _mm512_xor_si512(x, _mm512_xor_si512(a, b));
    }
    return (uint64_t)_mm512_reduce_or_epi64(x);
#else
    __m256i x = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 128) {
        const __m256i a = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(p + i)),
                                           _mm256_load_si256((const __m256i *)(p + i + 32)));
        const __m256i b = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(p + i + 64)),
                                           _mm256_load_si256((const __m256i *)(p + i + 96)));
        x = _mm256_xor_si256(x, _mm256_xor_si256(a, b));
    }
    return (uint64_t)_mm256_extract_epi64(x, 0) ^ (uint64_t)_mm256_extract_epi64(x, 3);
#endif
}

int main(void) {
    uint8_t *data = aligned_alloc(64, BYTES);
    if (data == NULL) {
        fprintf(stderr, "cannot allocate %zu bytes\n", BYTES);
        return 1;
    }
    memset(data, 1, BYTES); /* the pages exist before any round */
    uint64_t sink = 0;
    for (int threads = 1; threads <= omp_get_num_procs(); threads++) {
        double best = 0;
        for (int r = 0; r < ROUNDS; r++) {
            const double t0 = seconds();
#pragma omp parallel num_threads(threads) reduction(^ : sink)
            {
                const size_t share = BYTES / (size_t)threads / 256 * 256;
                sink ^= read_all(data + (size_t)omp_get_thread_num() * share, share);
            }
            const double gbs = (double)BYTES / (seconds() - t0) / 1e9;
            best = gbs > best ? gbs : best;
        }
        printf("%d thread(s): %.1f GB/s\n", threads, best);
    }
    free(data);
    return sink == 42; /* keeps the reads */
}
