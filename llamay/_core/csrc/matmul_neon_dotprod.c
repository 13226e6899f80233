/* The NEON kernels built with the dot product instructions (SDOT, ARMv8.2's DotProd): this file
   is compiled with them (setup.py, by its name), and matmul_neon.c calls it only where the CPU
   has them. */
#include "matmul_kernels.h"

#if LLAMAY_WITH_NEON && LLAMAY_WITH_DOTPROD
#if !LLAMAY_TARGETS_NEON || !defined(__ARM_FEATURE_DOTPROD)
#error "matmul_neon_dotprod.c is compiled for aarch64 with +dotprod (setup.py)"
#endif

#define MATMUL_FN(name) neon_dotprod_##name
#define MATMUL_KERNEL_OF llamay_neon_dotprod_kernel
#include "matmul_neon_body.h"

#else

llamay_matmul_fn llamay_neon_dotprod_kernel(int type) {
    (void)type;
    return NULL;
}

#endif
