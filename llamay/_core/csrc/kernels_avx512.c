/* The AVX-512 build of kernels_body.h; the same bits as the reference. */
#include "kernel_set.h"
#include "kernels.h"

#if LLAMAY_WITH_AVX512
#if !LLAMAY_TARGETS_AVX512
#error "kernels_avx512.c is compiled with the AVX-512 set's flags (setup.py)"
#endif
#define LLAMAY_VEC LLAMAY_VEC_AVX512
#define KERNELS_NAME "avx512"
#define KERNELS_SET LLAMAY_KERNELS_AVX512
#define KERNELS_TABLE llamay_kernels_avx512
#include "vec16.h"
#include "kernels_body.h"
#else
const llamay_kernels *llamay_kernels_avx512(void) { return NULL; }
#endif
