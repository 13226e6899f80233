/* CPU features and the kernel sets they allow (cpu.h, kernel_set.h). Compiled for the
   architecture's baseline: it must run on any CPU to say what that CPU lacks. */
#include "cpu.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LLAMAY_X86 1
#else
#define LLAMAY_X86 0
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

/* The features, one bit each, by the names Linux's /proc/cpuinfo gives them. */
enum {
    F_AVX,
    F_AVX2,
    F_FMA,
    F_F16C,
    F_BMI2,
    F_AVX512F,
    F_AVX512BW,
    F_AVX512DQ,
    F_AVX512VL,
    F_AVX512VNNI,
    F_AVX512BF16,
    F_AVXVNNI,
    F_ASIMD,
    F_ASIMDDP,
    F_I8MM,
    F_COUNT
};

static const char *const FEATURE_NAMES[F_COUNT] = {
    "avx",        "avx2",       "fma",      "f16c",    "bmi2",  "avx512f", "avx512bw", "avx512dq",
    "avx512vl",   "avx512vnni", "avx512bf16", "avxvnni", "asimd", "asimddp", "i8mm",
};

#define BIT(f) (1u << (f))

/* What each set needs. */
static const uint32_t NEEDS[LLAMAY_KERNEL_SETS] = {
    [LLAMAY_KERNELS_REFERENCE] = 0,
    [LLAMAY_KERNELS_AVX2] = BIT(F_AVX) | BIT(F_AVX2) | BIT(F_FMA) | BIT(F_F16C),
    [LLAMAY_KERNELS_AVX512] = BIT(F_AVX) | BIT(F_AVX2) | BIT(F_FMA) | BIT(F_F16C) |
                              BIT(F_AVX512F) | BIT(F_AVX512BW) | BIT(F_AVX512DQ) |
                              BIT(F_AVX512VL) | BIT(F_AVX512VNNI),
    [LLAMAY_KERNELS_NEON] = BIT(F_ASIMD),
};

#if LLAMAY_X86
/* The state the OS saves on a context switch (XCR0): AVX registers need bits 1-2 (SSE, AVX),
   AVX-512 also bits 5-7 (opmask, upper ZMM halves, ZMM16-31). */
static uint64_t os_saved_state(void) {
    uint32_t eax, edx;
    __asm__ __volatile__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static uint32_t detect(void) {
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        return 0;
    }
    const int osxsave = (c >> 27) & 1;
    const uint64_t xcr0 = osxsave ? os_saved_state() : 0;
    const int avx_state = (xcr0 & 0x6) == 0x6;
    const int avx512_state = avx_state && (xcr0 & 0xE0) == 0xE0;
    if (avx_state) {
        f |= ((c >> 28) & 1) ? BIT(F_AVX) : 0;
        f |= ((c >> 12) & 1) ? BIT(F_FMA) : 0;
        f |= ((c >> 29) & 1) ? BIT(F_F16C) : 0;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f |= ((b >> 8) & 1) ? BIT(F_BMI2) : 0;
        if (avx_state) {
            f |= ((b >> 5) & 1) ? BIT(F_AVX2) : 0;
        }
        if (avx512_state) {
            f |= ((b >> 16) & 1) ? BIT(F_AVX512F) : 0;
            f |= ((b >> 17) & 1) ? BIT(F_AVX512DQ) : 0;
            f |= ((b >> 30) & 1) ? BIT(F_AVX512BW) : 0;
            f |= ((b >> 31) & 1) ? BIT(F_AVX512VL) : 0;
            f |= ((c >> 11) & 1) ? BIT(F_AVX512VNNI) : 0;
        }
        const unsigned max_subleaf = a;
        if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            f |= (avx_state && ((a >> 4) & 1)) ? BIT(F_AVXVNNI) : 0;
            f |= (avx512_state && ((a >> 5) & 1)) ? BIT(F_AVX512BF16) : 0;
        }
    }
    return f;
}

#elif defined(__aarch64__)
static uint32_t detect(void) {
    uint32_t f = BIT(F_ASIMD); /* Advanced SIMD is part of every AArch64 CPU */
#if defined(__linux__)
    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    f |= (hwcap & (1ul << 20)) ? BIT(F_ASIMDDP) : 0; /* HWCAP_ASIMDDP */
    f |= (hwcap2 & (1ul << 13)) ? BIT(F_I8MM) : 0;   /* HWCAP2_I8MM */
#elif defined(__APPLE__)
    int value = 0;
    size_t size = sizeof value;
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &value, &size, NULL, 0) == 0 && value) {
        f |= BIT(F_ASIMDDP);
    }
    value = 0;
    size = sizeof value;
    if (sysctlbyname("hw.optional.arm.FEAT_I8MM", &value, &size, NULL, 0) == 0 && value) {
        f |= BIT(F_I8MM);
    }
#endif
    return f;
}

#else
static uint32_t detect(void) { return 0; }
#endif

/* Detected once; a race between two first callers only detects twice. */
static uint32_t features(void) {
    static int known;
    static uint32_t found;
    if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&found, detect(), __ATOMIC_RELAXED);
        __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&found, __ATOMIC_RELAXED);
}

static void append(char *buf, size_t n, const char *word) {
    const size_t used = strlen(buf);
    if (used + strlen(word) + 2 > n) {
        return;
    }
    if (used > 0) {
        strcat(buf, " ");
    }
    strcat(buf, word);
}

static void names_of(uint32_t bits, char *buf, size_t n) {
    if (n == 0) {
        return;
    }
    buf[0] = 0;
    for (int i = 0; i < F_COUNT; i++) {
        if (bits & BIT(i)) {
            append(buf, n, FEATURE_NAMES[i]);
        }
    }
}

void llamay_cpu_features(char *buf, size_t n) { names_of(features(), buf, n); }

/* The architecture a set's instructions belong to, or NULL for the reference. */
static const char *architecture_of(int set) {
    switch (set) {
    case LLAMAY_KERNELS_AVX2:
    case LLAMAY_KERNELS_AVX512: return "x86-64";
    case LLAMAY_KERNELS_NEON: return "aarch64";
    default: return NULL;
    }
}

static int on_architecture(const char *architecture) {
    if (architecture == NULL) {
        return 1;
    }
#if defined(__x86_64__)
    return strcmp(architecture, "x86-64") == 0;
#elif defined(__aarch64__)
    return strcmp(architecture, "aarch64") == 0;
#else
    return 0;
#endif
}

void llamay_cpu_missing(int set, char *buf, size_t n) {
    if (n == 0) {
        return;
    }
    buf[0] = 0;
    if (set < 0 || set >= LLAMAY_KERNEL_SETS) {
        return;
    }
    if (!on_architecture(architecture_of(set))) {
        append(buf, n, architecture_of(set));
        return;
    }
    names_of(NEEDS[set] & ~features(), buf, n);
}

int llamay_cpu_has_dotprod(void) { return (features() & BIT(F_ASIMDDP)) != 0; }

int llamay_kernel_set_runs(int set) {
    if (!llamay_kernel_set_compiled(set)) {
        return 0;
    }
    char missing[128];
    llamay_cpu_missing(set, missing, sizeof missing);
    return missing[0] == 0;
}

int llamay_kernel_set_best(void) {
    for (int set = LLAMAY_KERNEL_SETS - 1; set > LLAMAY_KERNELS_REFERENCE; set--) {
        if (llamay_kernel_set_runs(set)) {
            return set;
        }
    }
    return LLAMAY_KERNELS_REFERENCE;
}
