# cython: language_level=3
"""What the kernels were compiled for, checked against the CPU we run on.

This module is compiled without -march so that it runs anywhere; the kernels are not, and
importing them on a CPU without an instruction they use would die with SIGILL.
"""

cdef extern from *:
    """
    #include <string.h>
    #ifndef LLAMAY_BUILD_FLAGS
    #define LLAMAY_BUILD_FLAGS ""
    #endif
    static const char *llamay_build_flags(void) { return LLAMAY_BUILD_FLAGS; }

    /* Appends the name of each compiled-in feature the CPU lacks to buf (space separated). */
    static void llamay_missing(char *buf, size_t n) {
        buf[0] = 0;
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
        __builtin_cpu_init();
    #define CHECK(macro, name) \
        if (macro && !__builtin_cpu_supports(name)) { strncat(buf, name " ", n - strlen(buf) - 1); }
    #ifdef LLAMAY_NEED_SSE4_2
        CHECK(1, "sse4.2")
    #endif
    #ifdef LLAMAY_NEED_AVX
        CHECK(1, "avx")
    #endif
    #ifdef LLAMAY_NEED_AVX2
        CHECK(1, "avx2")
    #endif
    #ifdef LLAMAY_NEED_FMA
        CHECK(1, "fma")
    #endif
    #ifdef LLAMAY_NEED_F16C
        CHECK(1, "f16c")
    #endif
    #ifdef LLAMAY_NEED_BMI2
        CHECK(1, "bmi2")
    #endif
    #ifdef LLAMAY_NEED_AVX512F
        CHECK(1, "avx512f")
    #endif
    #ifdef LLAMAY_NEED_AVX512BW
        CHECK(1, "avx512bw")
    #endif
    #ifdef LLAMAY_NEED_AVX512DQ
        CHECK(1, "avx512dq")
    #endif
    #ifdef LLAMAY_NEED_AVX512VL
        CHECK(1, "avx512vl")
    #endif
    #ifdef LLAMAY_NEED_AVX512VNNI
        CHECK(1, "avx512vnni")
    #endif
    #ifdef LLAMAY_NEED_AVX512BF16
        CHECK(1, "avx512bf16")
    #endif
    #ifdef LLAMAY_NEED_AVXVNNI
        CHECK(1, "avxvnni")
    #endif
    #undef CHECK
    #endif
    }
    """
    const char *llamay_build_flags()
    void llamay_missing(char *buf, size_t n)


def build_flags() -> str:
    """The architecture flags the kernels were compiled with ('' for a portable build)."""
    return llamay_build_flags().decode()


def missing_features() -> list[str]:
    """Instruction-set features the kernels use that this CPU does not have."""
    cdef char buf[512]
    llamay_missing(buf, sizeof(buf))
    return buf.decode().split()
