/* What this CPU runs: its instruction-set features, found once at run time (cpuid on x86-64;
   the auxiliary vector on Linux and sysctl on macOS for aarch64), and which kernel sets
   (kernel_set.h) they allow. */
#ifndef LLAMAY_CPU_H
#define LLAMAY_CPU_H

#include <stddef.h>

#include "kernel_set.h"

/* The features of this CPU that some kernel set uses (or that a bug report should name),
   space-separated into buf, as the kernel names them ("avx2 fma f16c avx512f ..." or
   "asimd asimddp i8mm"). */
void llamay_cpu_features(char *buf, size_t n);

/* The features kernel set `set` needs that this CPU lacks, space-separated into buf: "" when
   it has them all. A set of another architecture lacks that architecture ("x86-64" or
   "aarch64"). */
void llamay_cpu_missing(int set, char *buf, size_t n);

/* 1 on an aarch64 CPU with the dot product instructions (SDOT/UDOT, ARMv8.2's DotProd). */
int llamay_cpu_has_dotprod(void);

#endif
