# cython: language_level=3
"""What this CPU runs: its features and the kernel sets (csrc/cpu.h, csrc/kernel_set.h).

Compiled for the architecture's baseline, like everything outside the kernel files, so it runs
on any CPU of it and can say what that CPU lacks.
"""

# (this form of cimport, not `cimport ... as`, is what cythonize tracks as a dependency)
from llamay._core.kernel_sets cimport (
    compiled_kernel_sets,
    kernel_set_names,
    kernel_set_of,
    llamay_cpu_features,
    missing_features,
    usable_kernel_sets as _usable_kernel_sets,
)

cdef extern from "threads.h" nogil:
    int llamay_cpu_count()


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one): the default
    thread count of a model."""
    return llamay_cpu_count()


def features() -> list:
    """The features of this CPU that a kernel set uses ('avx2', 'avx512vnni', 'asimddp'...)."""
    cdef char buf[512]
    llamay_cpu_features(buf, sizeof(buf))
    return buf.decode("ascii").split()


def kernel_sets() -> list:
    """Every kernel set this build carries, slowest first ('reference' is always there)."""
    return compiled_kernel_sets()


def usable_kernel_sets() -> list:
    """The kernel sets of this build that this CPU runs, slowest first."""
    return _usable_kernel_sets()


def best_kernel_set() -> str:
    """The fastest kernel set this CPU runs: what 'best' picks."""
    return kernel_set_names()[kernel_set_of("best")]


def missing(str kernels) -> list:
    """The features kernel set `kernels` needs that this CPU lacks ([] when it runs it)."""
    names = kernel_set_names()
    if kernels not in names:
        raise ValueError(f"unknown kernel set {kernels!r}; known: {', '.join(names)}")
    return missing_features(names.index(kernels))


def check(str kernels) -> str:
    """`kernels` ('best' or a set's name) as the set it picks, or the error of kernel_set_of."""
    return kernel_set_names()[kernel_set_of(kernels)]
