/* The AVX-512 build of kernels_body.h; the same bits as the reference. */
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define LLAMAY_VEC LLAMAY_VEC_AVX512
#define KERNELS_NAME "avx512"
#define KERNELS_TABLE llamay_kernels_avx512
#include "vec16.h"
#include "kernels_body.h"
#else
const llamay_kernels *llamay_kernels_avx512(void) { return NULL; }
#endif
