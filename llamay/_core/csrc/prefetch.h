/* Software prefetch of memory read once, in order (a decode step's weights).

   A decode step reads each weight byte once, and left to themselves the hardware prefetchers of
   the (virtual) machines measured keep too few lines in flight to overlap those loads with the
   arithmetic: a kernel asks, as it starts on `bytes` of weights at p, for the bytes
   LLAMAY_PREFETCH_AHEAD further on (weights are laid out in the order they are read).

   Each line is asked for twice: into L2 (prefetcht1) that far ahead, and into L1 (prefetcht0)
   llamay_prefetch_l1_ahead() ahead. On Intel's cores that is LLAMAY_PREFETCH_NEAR: a prefetch
   into L1 holds one of the core's few L1 miss buffers until memory answers, and with the far
   lines asked into L1 a one-token step of the 1B shape read 7.7 GB/s on a Xeon VM whose plain
   read loop reads 14.6-15.6; with the far lines into L2 and the near ones from there into L1,
   10.4. AMD's cores with AVX-512 (Zen 4 on) do the same: there a one-token step of the 1B
   shape read 26.5 GB/s with the far lines into L2, 16.3 with them into L1.
   Elsewhere (AMD's cores before Zen 4) both requests are for the far lines, the second joining
   the first: Zen 3 treats prefetcht1 as prefetcht0. Attention's next KV page follows the same choice: into L2 alone where the near
   lines go to L1 (llamay_prefetch_l1_target), into both elsewhere. LLAMAY_PREFETCH=l2 (near) or
   l1 (far) in the environment overrides the choice, to compare the two on one machine. See
   bench/NOTES.md, "Prefetch into L2". */
#ifndef LLAMAY_PREFETCH_H
#define LLAMAY_PREFETCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LLAMAY_PREFETCH_AHEAD 12288
#define LLAMAY_PREFETCH_NEAR 1024

/* 1: the lines asked into L1 are the near ones (Intel), 0: the far ones. Set as the library
   loads (each translation unit holds its own copy, all set alike). */
static int llamay_prefetch_near_into_l1;

__attribute__((constructor)) static void llamay_prefetch_choose(void) {
    const char *mode = getenv("LLAMAY_PREFETCH");
    if (mode != NULL && (strcmp(mode, "l1") == 0 || strcmp(mode, "l2") == 0)) {
        llamay_prefetch_near_into_l1 = strcmp(mode, "l2") == 0;
    } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        llamay_prefetch_near_into_l1 =
            __builtin_cpu_is("intel") || __builtin_cpu_supports("avx512f");
#endif
    }
}

/* How far ahead the lines asked into L1 are, where the far ones are `far_ahead` ahead. An
   offset, not a branch between two loops: with the branch in the kernels' block loops, a
   one-token step ran 1.2 times slower than with the prefetches written out. */
static inline size_t llamay_prefetch_l1_ahead(size_t far_ahead) {
    return llamay_prefetch_near_into_l1 ? LLAMAY_PREFETCH_NEAR : far_ahead;
}

/* Asks for the `bytes` at far into L2 and at near into L1 (where the two are the same lines,
   the second request joins the first). */
static inline void llamay_prefetch_lines(const uint8_t *far, const uint8_t *near, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) {
        __builtin_prefetch(far + o, 0, 2);
        __builtin_prefetch(near + o, 0, 3);
    }
}

/* Lines that stay in L1, the target of the L1 requests that are not to be made: as many as a KV
   row of 256 fp32 values, the most attention asks for at once */
static const uint8_t llamay_prefetch_idle_lines[1024] __attribute__((aligned(64)));

/* Where the L1 request beside an L2 request for `far` goes: to `far` itself where the L1
   requests name the far lines, else to lines already in L1 (a request that costs a load slot
   and nothing more). For attention's next KV page: on Intel's cores an L1 request for it held
   one of the few L1 miss buffers for a whole memory round trip, as the matmuls' far requests had
   (bench/NOTES.md, "Attention's next page into L2"). A mask, not a branch: with `if` around
   the L1 requests, decode at 4,096 positions spent 1.35-1.38 times as long on its depth
   (bench/ab.py depth, Xeon). */
static inline const uint8_t *llamay_prefetch_l1_target(const uint8_t *far) {
    const uintptr_t idle = (uintptr_t)0 - (uintptr_t)llamay_prefetch_near_into_l1;
    return (const uint8_t *)((uintptr_t)far +
                             (((uintptr_t)llamay_prefetch_idle_lines - (uintptr_t)far) & idle));
}

/* Part k of `parts` of the lines llamay_prefetch_lines(far, near, bytes) asks for. A kernel
   asks for its next bytes a part at a time as it goes through the bytes before them, not all
   at once: a burst of requests held every L1 miss buffer, and the requests waiting behind them
   stopped the arithmetic until memory answered (bench/NOTES.md, "Prefetch as the
   arithmetic goes"). */
static inline void llamay_prefetch_part(const uint8_t *far, const uint8_t *near, size_t bytes,
                                        int k, int parts) {
    const size_t lines = (bytes + 63) / 64;
    const size_t begin = lines * (size_t)k / (size_t)parts * 64;
    const size_t end = lines * (size_t)(k + 1) / (size_t)parts * 64;
    llamay_prefetch_lines(far + begin, near + begin, end - begin);
}

/* Part k of `parts` of what a kernel asks for as it reads `bytes` of weights at p, in order */
static inline void llamay_prefetch_ahead_part(const uint8_t *p, size_t bytes, int k, int parts) {
    llamay_prefetch_part(p + LLAMAY_PREFETCH_AHEAD,
                         p + llamay_prefetch_l1_ahead(LLAMAY_PREFETCH_AHEAD), bytes, k, parts);
}

/* As a kernel starts on `bytes` of weights at p, read in order */
static inline void llamay_prefetch_ahead(const uint8_t *p, size_t bytes) {
    llamay_prefetch_ahead_part(p, bytes, 0, 1);
}

#endif
