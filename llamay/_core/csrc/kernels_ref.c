/* The reference build of kernels_body.h: plain C, the definition of every result. */
#define LLAMAY_VEC LLAMAY_VEC_REF
#define KERNELS_NAME "reference"
#define KERNELS_SET LLAMAY_KERNELS_REFERENCE
#define KERNELS_TABLE llamay_kernels_ref
#include "vec16.h"
#include "kernels_body.h"
