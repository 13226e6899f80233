/* The NEON build of kernels_body.h (aarch64); the same bits as the reference. */
#include "kernel_set.h"
#include "kernels.h"

#if LLAMAY_WITH_NEON
#if !LLAMAY_TARGETS_NEON
#error "kernels_neon.c is compiled for aarch64 with the NEON set's flags (setup.py)"
#endif
#define LLAMAY_VEC LLAMAY_VEC_NEON
#define KERNELS_NAME "neon"
#define KERNELS_SET LLAMAY_KERNELS_NEON
#define KERNELS_TABLE llamay_kernels_neon
/* 32 registers of four lanes hold eight v16s, as AVX2's sixteen do */
#define ATTENTION_V_CHUNKS 1
#define ATTENTION_MAX_GROUP 4
#include "vec16.h"
#include "kernels_body.h"
#else
const llamay_kernels *llamay_kernels_neon(void) { return NULL; }
#endif
