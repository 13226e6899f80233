/* The kernel sets, and which of them a build holds.

   Every layer of kernels (dequantize/quantize, matmul, the forward step's kernels.h) has one
   version per set, chosen at run time by the set's number; every set computes the same bits.
   A set is compiled in when the compiler targets its instructions (-march=native, or nothing
   but the reference with LLAMAY_PORTABLE=1): the import-time CPU check vouches for them. The
   conditions are here once so that every layer agrees on what "compiled in" means. */
#ifndef LLAMAY_KERNEL_SET_H
#define LLAMAY_KERNEL_SET_H

/* The kernel sets, from slowest to fastest. */
enum llamay_kernel_set {
    LLAMAY_KERNELS_REFERENCE = 0, /* plain C: the definition of every result */
    LLAMAY_KERNELS_AVX2 = 1,      /* AVX2 + FMA + F16C */
    LLAMAY_KERNELS_AVX512 = 2,    /* AVX-512 F/BW/DQ/VL + VNNI (and what AVX2 needs) */
    LLAMAY_KERNEL_SETS = 3,
};

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LLAMAY_HAVE_AVX2 1
#else
#define LLAMAY_HAVE_AVX2 0
#endif

#if LLAMAY_HAVE_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define LLAMAY_HAVE_AVX512 1
#else
#define LLAMAY_HAVE_AVX512 0
#endif

/* 1 if `set` is compiled into this build. */
static inline int llamay_kernel_set_compiled(int set) {
    switch (set) {
    case LLAMAY_KERNELS_REFERENCE: return 1;
    case LLAMAY_KERNELS_AVX2: return LLAMAY_HAVE_AVX2;
    case LLAMAY_KERNELS_AVX512: return LLAMAY_HAVE_AVX512;
    default: return 0;
    }
}

/* The fastest set compiled in. */
static inline int llamay_kernel_set_best(void) {
    return LLAMAY_HAVE_AVX512 ? LLAMAY_KERNELS_AVX512
           : LLAMAY_HAVE_AVX2 ? LLAMAY_KERNELS_AVX2
                              : LLAMAY_KERNELS_REFERENCE;
}

#endif
