/* RoPE (rope.h): frequencies set up once per model, angles once per token, rotation per head. */
#include "rope.h"

#include <math.h>

#include "mathfn.h"

/* ggml_rope_yarn_corr_dim: the pair index whose wavelength fits n_rotations times into the
   original context. */
static double yarn_corr_dim(const llamay_rope_params *p, double n_rotations) {
    const double two_pi = 6.28318530717958647693;
    return p->n_rot * llamay_log_d(p->n_ctx_orig / (n_rotations * two_pi)) /
           (2.0 * llamay_log_d(p->freq_base));
}

int llamay_rope_init(llamay_rope *rope, const llamay_rope_params *p) {
    if (p->n_rot <= 0 || p->n_rot % 2 != 0 || p->n_rot / 2 > LLAMAY_ROPE_MAX_PAIRS) {
        return -1;
    }
    rope->n_rot = p->n_rot;
    rope->neox = p->neox;
    rope->mscale = p->attn_factor;
    /* ggml_rope_yarn_corr_dims: the ramp from extrapolation (below low) to interpolation */
    double low = 0.0, high = 0.0;
    if (p->ext_factor != 0.0) {
        low = floor(yarn_corr_dim(p, p->beta_fast));
        high = ceil(yarn_corr_dim(p, p->beta_slow));
        low = low > 0.0 ? low : 0.0;
        high = high < p->n_rot - 1.0 ? high : p->n_rot - 1.0;
        /* rope_yarn: YaRN's attention temperature, folded into the magnitude */
        rope->mscale *= 1.0 + 0.1 * llamay_log_d(1.0 / p->freq_scale);
    }
    const double log_base = llamay_log_d(p->freq_base);
    for (int i = 0; i < p->n_rot / 2; i++) {
        double inv_freq = llamay_exp_d(-2.0 * i / p->n_rot * log_base);
        if (p->freq_factors != NULL) {
            inv_freq /= p->freq_factors[i];
        }
        double scale = p->freq_scale;
        if (p->ext_factor != 0.0) {
            const double span = high - low > 0.001 ? high - low : 0.001;
            double y = (i - low) / span;
            y = y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
            const double mix = (1.0 - y) * p->ext_factor;
            scale = p->freq_scale * (1.0 - mix) + mix;
        }
        rope->coef[i] = inv_freq * scale;
    }
    return 0;
}

void llamay_rope_cos_sin(const llamay_rope *rope, int pos, float *cos_sin) {
    for (int i = 0; i < rope->n_rot / 2; i++) {
        double s, c;
        llamay_sincos_d(pos * rope->coef[i], &s, &c);
        cos_sin[2 * i] = (float)(c * rope->mscale);
        cos_sin[2 * i + 1] = (float)(s * rope->mscale);
    }
}

void llamay_rope_apply(const llamay_rope *rope, const float *cos_sin, float *x) {
    const int half = rope->n_rot / 2;
    for (int i = 0; i < half; i++) {
        const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        float *a = rope->neox ? x + i : x + 2 * i;
        float *b = rope->neox ? x + i + half : x + 2 * i + 1;
        const float x0 = *a, x1 = *b;
        *a = x0 * c - x1 * s;
        *b = x0 * s + x1 * c;
    }
}
