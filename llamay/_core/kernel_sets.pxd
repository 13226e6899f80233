# The kernel sets by name (csrc/kernel_set.h), for the modules that let a caller pick one:
# 'reference', 'avx2', 'avx512', 'neon', or 'best' (the fastest this CPU runs). A build carries
# every set of its architecture; every set gives the same bits; a caller picks one to check
# exactly that, or to time it.

cdef extern from "kernel_set.h" nogil:
    int llamay_kernel_set_compiled(int kernel_set)
    int llamay_kernel_set_runs(int kernel_set)
    int llamay_kernel_set_best()

cdef extern from "cpu.h" nogil:
    void llamay_cpu_missing(int kernel_set, char *buf, size_t n)
    void llamay_cpu_features(char *buf, size_t n)


cdef inline tuple kernel_set_names():
    """Every kernel set, by number (enum llamay_kernel_set)."""
    return ("reference", "avx2", "avx512", "neon")


cdef inline list compiled_kernel_sets():
    """The kernel sets compiled into this build, slowest first ('reference' is always there)."""
    return [name for i, name in enumerate(kernel_set_names()) if llamay_kernel_set_compiled(i)]


cdef inline list usable_kernel_sets():
    """The kernel sets of this build that this CPU runs, slowest first."""
    return [name for i, name in enumerate(kernel_set_names()) if llamay_kernel_set_runs(i)]


cdef inline list missing_features(int kernel_set):
    """The CPU features kernel set number `kernel_set` needs that this CPU lacks."""
    cdef char buf[256]
    llamay_cpu_missing(kernel_set, buf, sizeof(buf))
    return buf.decode("ascii").split()


cdef inline int kernel_set_of(str kernels) except -1:
    """The number of the kernel set named `kernels`: ValueError for an unknown name,
    UnsupportedCPU for a set this build lacks or this CPU cannot run (naming what it lacks)."""
    cdef int kernel_set
    names = kernel_set_names()
    if kernels == "best":
        return llamay_kernel_set_best()
    if kernels not in names:
        raise ValueError(f"unknown kernel set {kernels!r}; known: best, {', '.join(names)}")
    # imported here: a .pxd's Python-level imports do not reach the modules that cimport it
    from llamay.errors import UnsupportedCPU

    kernel_set = names.index(kernels)
    if not llamay_kernel_set_compiled(kernel_set):
        raise UnsupportedCPU(
            f"this build of llamay has no kernel set {kernels!r} (it has "
            f"{', '.join(compiled_kernel_sets())})"
        )
    missing = missing_features(kernel_set)
    if missing:
        raise UnsupportedCPU(
            f"kernel set {kernels!r} needs {', '.join(missing)}, which this CPU lacks "
            f"(it runs {', '.join(usable_kernel_sets())})"
        )
    return kernel_set
