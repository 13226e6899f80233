# The kernel sets by name (csrc/kernel_set.h), for the modules that let a caller pick one:
# 'reference', 'avx2', 'avx512', or 'best' (the fastest compiled in). Every set gives the same
# bits; a caller picks one to check exactly that, or to time it.

cdef extern from "kernel_set.h" nogil:
    int llamay_kernel_set_compiled(int kernel_set)
    int llamay_kernel_set_best()


cdef inline tuple kernel_set_names():
    """Every kernel set, by number (enum llamay_kernel_set)."""
    return ("reference", "avx2", "avx512")


cdef inline list compiled_kernel_sets():
    """The kernel sets compiled into this build, slowest first ('reference' is always there)."""
    return [name for i, name in enumerate(kernel_set_names()) if llamay_kernel_set_compiled(i)]


cdef inline int kernel_set_of(str kernels) except -1:
    """The number of the kernel set named `kernels`, or ValueError naming those there are."""
    names = kernel_set_names()
    if kernels == "best":
        return llamay_kernel_set_best()
    if kernels not in names:
        raise ValueError(f"unknown kernel set {kernels!r}; known: best, {', '.join(names)}")
    if not llamay_kernel_set_compiled(names.index(kernels)):
        raise ValueError(
            f"kernel set {kernels!r} is not compiled in; available: {compiled_kernel_sets()}"
        )
    return names.index(kernels)
