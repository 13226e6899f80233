/* The AVX2 build of kernels_body.h (with FMA and F16C); the same bits as the reference. */
#include "kernel_set.h"
#include "kernels.h"

#if LLAMAY_WITH_AVX2
#if !LLAMAY_TARGETS_AVX2
#error "kernels_avx2.c is compiled with the AVX2 set's flags (setup.py)"
#endif
#define LLAMAY_VEC LLAMAY_VEC_AVX2
#define KERNELS_NAME "avx2"
#define KERNELS_SET LLAMAY_KERNELS_AVX2
#define KERNELS_TABLE llamay_kernels_avx2
/* 16 ymm registers: one chunk of 16 outputs for each of at most four heads in the V loop */
#define ATTENTION_V_CHUNKS 1
#define ATTENTION_MAX_GROUP 4
#include "vec16.h"
#include "kernels_body.h"
#else
const llamay_kernels *llamay_kernels_avx2(void) { return NULL; }
#endif
