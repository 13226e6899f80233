/* NEON kernels (aarch64): the same bits as matmul_ref.c. Until a type has its own, the set
   runs the reference's kernel for it (the same bits, slower). */
#include "matmul_kernels.h"

llamay_matmul_fn llamay_neon_kernel(int type) {
    (void)type;
    return NULL;
}
