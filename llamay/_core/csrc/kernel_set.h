/* The kernel sets, which of them a build carries, and which this CPU runs.

   Every layer of kernels (dequantize/quantize, matmul, the forward step's kernels.h) has one
   version per set, chosen at run time by the set's number; every set computes the same bits.
   A build carries every set of its architecture: the reference everywhere, AVX2 and AVX-512
   on x86-64, NEON on aarch64. Each set's files (`*_avx2.c`, `*_avx512.c`, `*_neon.c`) are
   compiled with that set's target flags, everything else for the architecture's baseline
   (setup.py), and the best set the CPU runs is chosen at load (cpu.h), so one build runs on
   every CPU of its architecture. */
#ifndef LLAMAY_KERNEL_SET_H
#define LLAMAY_KERNEL_SET_H

/* The kernel sets, from slowest to fastest on their architecture. */
enum llamay_kernel_set {
    LLAMAY_KERNELS_REFERENCE = 0, /* plain C: the definition of every result */
    LLAMAY_KERNELS_AVX2 = 1,      /* x86-64: AVX2 + FMA + F16C */
    LLAMAY_KERNELS_AVX512 = 2,    /* x86-64: AVX-512 F/BW/DQ/VL + VNNI (and what AVX2 needs) */
    LLAMAY_KERNELS_NEON = 3,      /* aarch64: Advanced SIMD (the dot product where the CPU has it) */
    LLAMAY_KERNEL_SETS = 4,
};

/* The sets a build carries: setup.py defines LLAMAY_WITH_<SET> 1 for every file of a build
   that compiles the set's files with its flags. */
#ifndef LLAMAY_WITH_AVX2
#define LLAMAY_WITH_AVX2 0
#endif
#ifndef LLAMAY_WITH_AVX512
#define LLAMAY_WITH_AVX512 0
#endif
#ifndef LLAMAY_WITH_NEON
#define LLAMAY_WITH_NEON 0
#endif
/* Not a set: the NEON set's build of its matmul kernels with the dot product instructions
   (matmul_neon_dotprod.c), compiled where the compiler takes them, run where the CPU has them */
#ifndef LLAMAY_WITH_DOTPROD
#define LLAMAY_WITH_DOTPROD 0
#endif

/* Whether this file is compiled for a set's instructions: true in the set's own files (which
   check it), false in baseline files, which only call them through the sets' tables. */
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LLAMAY_TARGETS_AVX2 1
#else
#define LLAMAY_TARGETS_AVX2 0
#endif

#if LLAMAY_TARGETS_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define LLAMAY_TARGETS_AVX512 1
#else
#define LLAMAY_TARGETS_AVX512 0
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#define LLAMAY_TARGETS_NEON 1
#else
#define LLAMAY_TARGETS_NEON 0
#endif

/* 1 if `set` is compiled into this build. */
static inline int llamay_kernel_set_compiled(int set) {
    switch (set) {
    case LLAMAY_KERNELS_REFERENCE: return 1;
    case LLAMAY_KERNELS_AVX2: return LLAMAY_WITH_AVX2;
    case LLAMAY_KERNELS_AVX512: return LLAMAY_WITH_AVX512;
    case LLAMAY_KERNELS_NEON: return LLAMAY_WITH_NEON;
    default: return 0;
    }
}

/* 1 if `set` is compiled in and this CPU has every instruction it uses (cpu.c). */
int llamay_kernel_set_runs(int set);

/* The fastest set that runs here. */
int llamay_kernel_set_best(void);

#endif
