/* Our own double-precision exp, log and sin/cos, so that the C library does not decide results.

   They set up RoPE's frequencies and angles and finish log-softmax; each is accurate to a few
   ulp over the arguments it gets there (|x| < 2^20 for sin/cos), and, being plain arithmetic,
   gives the same bits on every machine. */
#ifndef LLAMAY_MATHFN_H
#define LLAMAY_MATHFN_H

#include <stdint.h>
#include <string.h>

static inline double llamay_d_from_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline uint64_t llamay_d_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* x rounded to the nearest integer, ties to even (|x| < 2^51) */
static inline double llamay_round_d(double x) {
    const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
    return (x + magic) - magic;
}

#define LLAMAY_LN2_HI 6.93147180369123816490e-01 /* ln 2 in 32 bits: k * LN2_HI is exact */
#define LLAMAY_LN2_LO 1.90821492927058770002e-10

/* e^x for x in [-700, 700] */
static inline double llamay_exp_d(double x) {
    const double k = llamay_round_d(x * 1.44269504088896338700);
    const double r = (x - k * LLAMAY_LN2_HI) - k * LLAMAY_LN2_LO; /* |r| <= 0.35 */
    /* Taylor series to r^13: the remainder is below 1e-17 */
    double p = 1.0 / 6227020800.0;
    const double inv_fact[] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                               1.0 / 362880.0,    1.0 / 40320.0,    1.0 / 5040.0,
                               1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,
                               1.0 / 6.0,         0.5,              1.0,
                               1.0};
    for (int i = 0; i < 13; i++) p = p * r + inv_fact[i];
    return p * llamay_d_from_bits((uint64_t)((int64_t)k + 1023) << 52);
}

/* ln x for finite x > 0 (normal) */
static inline double llamay_log_d(double x) {
    const uint64_t bits = llamay_d_bits(x);
    int e = (int)((bits >> 52) & 0x7FF) - 1023;
    double m = llamay_d_from_bits((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e += 1;
    }
    /* ln m = 2 atanh(f) = 2 (f + f^3/3 + f^5/5 + ...), |f| <= 0.172: to f^25 */
    const double f = (m - 1.0) / (m + 1.0), s = f * f;
    double p = 1.0 / 25.0;
    for (int n = 23; n >= 1; n -= 2) p = p * s + 1.0 / n;
    return (e * LLAMAY_LN2_HI + 2.0 * f * p) + e * LLAMAY_LN2_LO;
}

/* sin x and cos x for |x| < 2^20: x = k pi/2 + r (Cody-Waite, fdlibm's three parts of pi/2),
   then Taylor series on |r| <= pi/4 (remainders below 1e-18) and the quadrant of k. */
static inline void llamay_sincos_d(double x, double *sin_x, double *cos_x) {
    const double k = llamay_round_d(x * 6.36619772367581382433e-01);
    const double r = ((x - k * 1.57079632673412561417e+00) - k * 6.07710050630396597660e-11) -
                     k * 2.02226624879595063154e-21;
    const double r2 = r * r;
    /* 1/n! for n = 1 .. 18 */
    static const double inv_fact[19] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
        1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0,
        1.0 / 87178291200.0, 1.0 / 1307674368000.0, 1.0 / 20922789888000.0,
        1.0 / 355687428096000.0, 1.0 / 6402373705728000.0};
    /* s = 1 - r^2/3! + r^4/5! - ... + r^16/17!, c = 1/2! - r^2/4! + ... + r^16/18! */
    double s = inv_fact[17], c = inv_fact[18];
    for (int n = 15; n >= 1; n -= 2) {
        s = inv_fact[n] - r2 * s;
        c = inv_fact[n + 1] - r2 * c;
    }
    const double sr = r * s, cr = 1.0 - r2 * c;
    switch ((int64_t)k & 3) {
    case 0: *sin_x = sr, *cos_x = cr; break;
    case 1: *sin_x = cr, *cos_x = -sr; break;
    case 2: *sin_x = -sr, *cos_x = -cr; break;
    default: *sin_x = -cr, *cos_x = sr; break;
    }
}

#endif
