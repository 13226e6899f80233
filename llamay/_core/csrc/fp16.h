/* fp16 and bf16 <-> fp32, bit-exact with ggml on x86.

   ggml converts fp16 with the F16C instructions where the CPU has them (GGML_FP16_TO_FP32 is
   _cvtsh_ss, GGML_FP32_TO_FP16 is _cvtss_sh(x, 0): round to nearest even). The `_scalar`
   versions below are plain C that give the same bits for every input, NaNs included (F16C
   quiets a signalling NaN and keeps the top of its payload); the unsuffixed versions use F16C
   when it is compiled in. bf16 follows ggml_compute_fp32_to_bf16: round to nearest even, NaNs
   forced quiet. */
#ifndef LLAMAY_FP16_H
#define LLAMAY_FP16_H

#include <stdint.h>
#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t llamay_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float llamay_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float llamay_fp16_to_fp32_scalar(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exponent = (h >> 10) & 0x1F;
    uint32_t mantissa = h & 0x3FF;
    if (exponent == 0x1F) { /* inf, or NaN made quiet */
        const uint32_t quiet = mantissa ? 0x400000 : 0;
        return llamay_f32_from_bits(sign | 0x7F800000 | (mantissa << 13) | quiet);
    }
    if (exponent != 0) {
        return llamay_f32_from_bits(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
    }
    if (mantissa == 0) {
        return llamay_f32_from_bits(sign);
    }
    /* subnormal: mantissa * 2^-24, normalised so that its leading one becomes implicit */
    const int shift = __builtin_clz(mantissa) - 21;
    mantissa = (mantissa << shift) & 0x3FF;
    return llamay_f32_from_bits(sign | ((uint32_t)(113 - shift) << 23) | (mantissa << 13));
}

static inline uint16_t llamay_fp32_to_fp16_scalar(float f) {
    const uint32_t u = llamay_f32_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    const uint32_t a = u & 0x7FFFFFFF;
    if (a > 0x7F800000) { /* NaN: quiet, payload truncated */
        return sign | 0x7E00 | ((a >> 13) & 0x3FF);
    }
    if (a >= 0x477FF000) { /* >= 65520 rounds past the largest half, 65504 */
        return sign | 0x7C00;
    }
    if (a >= 0x38800000) { /* >= 2^-14: a normal half. Rebias the exponent, round to even. */
        const uint32_t r = a - ((uint32_t)(127 - 15) << 23);
        return sign | (uint16_t)((r + 0xFFF + ((r >> 13) & 1)) >> 13);
    }
    if (a <= 0x33000000) { /* <= 2^-25: rounds to zero (2^-25 is a tie, and zero is even) */
        return sign;
    }
    /* a subnormal half: round (significand * 2^(e-150)) / 2^-24 to an integer, ties to even;
       rounding up to 0x400 gives the smallest normal, which is the right encoding */
    const uint32_t significand = (a & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - (a >> 23);
    const uint32_t rest = significand & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t q = significand >> shift;
    if (rest > halfway || (rest == halfway && (q & 1))) {
        q += 1;
    }
    return sign | (uint16_t)q;
}

static inline float llamay_fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return llamay_fp16_to_fp32_scalar(h);
#endif
}

static inline uint16_t llamay_fp32_to_fp16(float f) {
#if defined(__F16C__)
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    return llamay_fp32_to_fp16_scalar(f);
#endif
}

static inline float llamay_bf16_to_fp32(uint16_t h) {
    return llamay_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t llamay_fp32_to_bf16(float f) {
    const uint32_t u = llamay_f32_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) {
        return (uint16_t)((u >> 16) | 64);
    }
    return (uint16_t)((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}

#endif
