/* Rotary position embeddings as ggml_rope_ext computes them: normal (adjacent pairs, Llama) or
   NeoX (the two halves), with linear scaling, frequency factors (Llama 3's rope_freqs, Phi-3's
   LongRoPE) and YaRN.

   For pair i (0 <= i < n_rot/2) at position p:
     theta_extrap = p * base^(-2i/n_rot) / factor_i,   theta_interp = freq_scale * theta_extrap
     theta = theta_interp, or with YaRN mix(theta_interp, theta_extrap, ramp_i * ext_factor)
     (cos, sin) = (cos theta, sin theta) * mscale
   Everything up to cos and sin is computed in double with mathfn.h (theta = p * coef_i, coef_i
   set up once), then rounded to fp32; the rotation is fp32. */
#ifndef LLAMAY_ROPE_H
#define LLAMAY_ROPE_H

#define LLAMAY_ROPE_MAX_PAIRS 256

typedef struct {
    int n_rot; /* rotated dimensions: even, at most 2 * LLAMAY_ROPE_MAX_PAIRS */
    int neox;
    double freq_base, freq_scale; /* freq_scale = 1 / the linear or YaRN factor */
    double ext_factor;            /* YaRN's extrapolation mix: 1 for YaRN, 0 otherwise */
    double attn_factor;           /* multiplies cos and sin */
    double beta_fast, beta_slow;  /* YaRN's ramp, in rotations over the original context */
    int n_ctx_orig;
    const float *freq_factors; /* n_rot/2 divisors of the frequencies, or NULL */
} llamay_rope_params;

typedef struct {
    int n_rot, neox;
    double mscale;
    double coef[LLAMAY_ROPE_MAX_PAIRS]; /* theta_i = p * coef[i] */
} llamay_rope;

/* 0, or -1 when n_rot is odd, not positive or too large. */
int llamay_rope_init(llamay_rope *rope, const llamay_rope_params *params);

/* (cos, sin) of each pair at position pos: n_rot floats. */
void llamay_rope_cos_sin(const llamay_rope *rope, int pos, float *cos_sin);

/* Rotates the first n_rot dimensions of one head in place. */
void llamay_rope_apply(const llamay_rope *rope, const float *cos_sin, float *x);

#endif
