/* NEON kernels (aarch64): the same bits as matmul_ref.c. matmul_neon_body.h is compiled here
   for every AArch64 CPU (Advanced SIMD alone), and in matmul_neon_dotprod.c with the dot
   product instructions; the set runs that build where the CPU has them (cpu.h). Both give the
   same integers, so the same bits. */
#include "matmul_kernels.h"

#if LLAMAY_WITH_NEON
#if !LLAMAY_TARGETS_NEON
#error "matmul_neon.c is compiled for aarch64 with the NEON set's flags (setup.py)"
#endif

#include "cpu.h"

#define MATMUL_FN(name) neon_##name
#define MATMUL_KERNEL_OF llamay_neon_plain_kernel
#include "matmul_neon_body.h"

llamay_matmul_fn llamay_neon_kernel(int type) {
    const llamay_matmul_fn dotprod =
        llamay_cpu_has_dotprod() ? llamay_neon_dotprod_kernel(type) : NULL;
    return dotprod != NULL ? dotprod : llamay_neon_plain_kernel(type);
}

#else

llamay_matmul_fn llamay_neon_plain_kernel(int type) {
    (void)type;
    return NULL;
}

llamay_matmul_fn llamay_neon_kernel(int type) {
    (void)type;
    return NULL;
}

#endif
