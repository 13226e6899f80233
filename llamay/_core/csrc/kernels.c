/* The kernels.h table of each kernel set. */
#include "kernels.h"

#include "kernel_set.h"

const llamay_kernels *llamay_kernels_of(int set) {
    switch (set) {
    case LLAMAY_KERNELS_REFERENCE: return llamay_kernels_ref();
    case LLAMAY_KERNELS_AVX2: return llamay_kernels_avx2();
    case LLAMAY_KERNELS_AVX512: return llamay_kernels_avx512();
    case LLAMAY_KERNELS_NEON: return llamay_kernels_neon();
    default: return NULL;
    }
}
