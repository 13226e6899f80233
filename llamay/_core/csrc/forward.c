/* The forward step (forward.h): scratch buffers, then the step itself, stage by stage.

   Inside the one parallel region, thread i of n owns tokens t with t % n == i for every
   per-token stage (norms, RoPE, KV writes, attention, activations, quantizing activations),
   and a contiguous slice of rows of every weight matrix. A barrier separates a stage from the
   next one that reads what another thread wrote. No output is ever summed across threads. */
#include "forward.h"

#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "fp16.h"
#include "matmul_kernels.h"
#include "quants.h"

/* ---- scratch ---- */

/* The float buffers, each max_tokens rows of the widest layer's size. */
enum {
    X,       /* the residual stream: n_embd */
    XN,      /* a normed copy of x (the input of a matmul): n_embd */
    Q,       /* the q (or fused qkv) projection */
    K,       /* the k projection */
    V,       /* the v projection */
    ATTN,    /* attention output: n_head * head_dim */
    PROJ,    /* attention or FFN output before the residual add: n_embd */
    GATE,    /* the FFN's gate projection, then act(gate) * up in place */
    UP,      /* the FFN's up (or fused [gate; up]: act(gate) * up goes over the gate) */
    COS_SIN, /* RoPE's cos and sin for each of the model's ropes: the sum of their n_rot */
    N_BUFFERS
};

struct llamay_scratch {
    int max_tokens;
    float *f[N_BUFFERS];
    uint8_t *act[4]; /* quantized activations, one buffer per enum llamay_act_kind */
};

#define ALIGN 64

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static void need_act(size_t act_bytes[4], const llamay_linear *l, int max_tokens) {
    act_bytes[l->w.act_kind] =
        max_size(act_bytes[l->w.act_kind], l->w.act_row_bytes * (size_t)max_tokens);
}

static int cos_sin_stride(const llamay_model *m) {
    int n = 0;
    for (int r = 0; r < m->n_ropes; r++) n += m->ropes[r].n_rot;
    return n;
}

/* Bytes of every buffer for steps of max_tokens tokens. */
static void scratch_sizes(const llamay_model *m, int max_tokens, size_t bytes[N_BUFFERS],
                          size_t act_bytes[4]) {
    size_t floats[N_BUFFERS] = {0};
    memset(act_bytes, 0, 4 * sizeof(size_t));
    floats[X] = floats[XN] = floats[PROJ] = (size_t)m->n_embd;
    floats[COS_SIN] = (size_t)cos_sin_stride(m);
    for (int il = 0; il < m->n_layer; il++) {
        const llamay_layer *l = &m->layers[il];
        floats[Q] = max_size(floats[Q], (size_t)l->q.w.n_rows);
        floats[ATTN] = max_size(floats[ATTN], (size_t)l->n_head * m->head_dim);
        floats[UP] = max_size(floats[UP], (size_t)l->up.w.n_rows);
        need_act(act_bytes, &l->q, max_tokens);
        need_act(act_bytes, &l->o, max_tokens);
        need_act(act_bytes, &l->up, max_tokens);
        need_act(act_bytes, &l->down, max_tokens);
        if (!l->fused_qkv) {
            floats[K] = max_size(floats[K], (size_t)l->k.w.n_rows);
            floats[V] = max_size(floats[V], (size_t)l->v.w.n_rows);
            need_act(act_bytes, &l->k, max_tokens);
            need_act(act_bytes, &l->v, max_tokens);
        }
        if (!l->fused_gate_up) {
            floats[GATE] = max_size(floats[GATE], (size_t)l->gate.w.n_rows);
            need_act(act_bytes, &l->gate, max_tokens);
        }
    }
    need_act(act_bytes, &m->output, max_tokens);
    for (int i = 0; i < N_BUFFERS; i++) {
        bytes[i] = round_up(floats[i] * (size_t)max_tokens * sizeof(float));
    }
}

size_t llamay_scratch_bytes(const llamay_model *m, int max_tokens) {
    size_t bytes[N_BUFFERS], act_bytes[4], total = 0;
    scratch_sizes(m, max_tokens, bytes, act_bytes);
    for (int i = 0; i < N_BUFFERS; i++) total += bytes[i];
    for (int k = 0; k < 4; k++) total += round_up(act_bytes[k]);
    return total;
}

llamay_scratch *llamay_scratch_new(const llamay_model *m, int max_tokens) {
    llamay_scratch *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    s->max_tokens = max_tokens;
    size_t bytes[N_BUFFERS], act_bytes[4];
    scratch_sizes(m, max_tokens, bytes, act_bytes);
    int ok = 1;
    for (int i = 0; i < N_BUFFERS; i++) {
        s->f[i] = aligned_alloc(ALIGN, bytes[i] ? bytes[i] : ALIGN);
        ok = ok && s->f[i] != NULL;
    }
    for (int k = 0; k < 4; k++) {
        if (act_bytes[k]) {
            s->act[k] = aligned_alloc(ALIGN, round_up(act_bytes[k]));
            ok = ok && s->act[k] != NULL;
        }
    }
    if (!ok) {
        llamay_scratch_free(s);
        return NULL;
    }
    return s;
}

void llamay_scratch_free(llamay_scratch *s) {
    if (s == NULL) {
        return;
    }
    for (int i = 0; i < N_BUFFERS; i++) free(s->f[i]);
    for (int k = 0; k < 4; k++) free(s->act[k]);
    free(s);
}

/* ---- the stages ---- */

/* Everything a thread needs to know about the step. */
typedef struct {
    const llamay_model *m;
    const llamay_pages *kv;
    llamay_scratch *s;
    const llamay_batch *b;
    int thread, n_threads;
} step;

/* [begin, end) of n rows for this thread, in multiples of 16 so that the matmul kernels' row
   tiles stay whole (results do not depend on it either way). */
static void row_slice(const step *st, int n, int *begin, int *end) {
    const int grain = 16;
    const int n_grains = (n + grain - 1) / grain;
    const int per_thread = (n_grains + st->n_threads - 1) / st->n_threads;
    const int b = st->thread * per_thread * grain, e = (st->thread + 1) * per_thread * grain;
    *begin = b < n ? b : n;
    *end = e < n ? e : n;
}

/* Quantizes one row of x for l's kernel, into row t of its activation buffer. */
static void quantize_row(const step *st, const llamay_linear *l, const float *x, int t) {
    uint8_t *act = st->s->act[l->w.act_kind];
    llamay_quantize_activations(&l->w, x, 0, 1, act + (size_t)t * l->w.act_row_bytes);
}

/* This thread's rows of x @ l^T (+ bias) for n_tokens tokens, out rows l->w.n_rows apart. */
static void linear(const step *st, const llamay_linear *l, int n_tokens, float *out) {
    int r0, r1;
    row_slice(st, l->w.n_rows, &r0, &r1);
    llamay_matmul(&l->w, st->s->act[l->w.act_kind], n_tokens, out, r0, r1);
    if (l->bias != NULL) {
        for (int t = 0; t < n_tokens; t++) {
            float *row = out + (size_t)t * l->w.n_rows;
            for (int r = r0; r < r1; r++) row[r] += l->bias[r];
        }
    }
}

static void add(float *x, const float *y, int n) {
    for (int i = 0; i < n; i++) x[i] += y[i];
}

/* Token t's row of the embedding table, dequantized, scaled where the family does. */
static void embed(const step *st, int t) {
    const llamay_model *m = st->m;
    const llamay_quant_type *type = llamay_quant_type_of(m->tok_embd_type);
    const size_t row_bytes = (size_t)(m->n_embd / type->block_elems) * type->block_bytes;
    float *x = st->s->f[X] + (size_t)t * m->n_embd;
    type->to_float[m->kernels->set](m->tok_embd + (size_t)st->b->tokens[t] * row_bytes, x,
                                    m->n_embd);
    if (m->embd_scale != 1.0f) {
        for (int i = 0; i < m->n_embd; i++) x[i] *= m->embd_scale;
    }
}

/* Token t's RoPE cos and sin for each of the model's ropes, once for all layers. */
static void rope_angles(const step *st, int t) {
    const llamay_model *m = st->m;
    float *cos_sin = st->s->f[COS_SIN] + (size_t)t * cos_sin_stride(m);
    for (int r = 0; r < m->n_ropes; r++) {
        llamay_rope_cos_sin(&m->ropes[r], st->b->positions[t], cos_sin);
        cos_sin += m->ropes[r].n_rot;
    }
}

/* x[t] normed into xn[t] (weight NULL: x[t] as it is) and quantized for the matmuls that read
   it (each act kind once). */
static void norm_and_quantize(const step *st, const float *weight, int t,
                              const llamay_linear *const *ls, int n_ls) {
    const llamay_model *m = st->m;
    const float *x = st->s->f[X] + (size_t)t * m->n_embd;
    float *xn = st->s->f[XN] + (size_t)t * m->n_embd;
    if (weight != NULL) {
        m->kernels->rms_norm(x, weight, m->n_embd, m->norm_eps, xn);
    } else {
        memcpy(xn, x, (size_t)m->n_embd * sizeof(float));
    }
    int done = 0; /* bit per act kind */
    for (int i = 0; i < n_ls; i++) {
        if (!(done >> ls[i]->w.act_kind & 1)) {
            quantize_row(st, ls[i], xn, t);
            done |= 1 << ls[i]->w.act_kind;
        }
    }
}

static void qkv_inputs(const llamay_layer *l, const llamay_linear *ls[3], int *n) {
    ls[0] = &l->q;
    ls[1] = &l->k;
    ls[2] = &l->v;
    *n = l->fused_qkv ? 1 : 3;
}

static void ffn_inputs(const llamay_layer *l, const llamay_linear *ls[2], int *n) {
    ls[0] = &l->up;
    ls[1] = &l->gate;
    *n = l->fused_gate_up ? 1 : 2;
}

/* Token t's query and key heads normed and rotated; its K and V rows written to its page. */
static void rope_and_store(const step *st, int il, int t) {
    const llamay_model *m = st->m;
    const llamay_layer *l = &m->layers[il];
    const llamay_scratch *s = st->s;
    const int D = m->head_dim;
    const llamay_rope *rope = l->rope >= 0 ? &m->ropes[l->rope] : NULL;
    const float *cos_sin = s->f[COS_SIN] + (size_t)t * cos_sin_stride(m);
    for (int r = 0; r < l->rope; r++) cos_sin += m->ropes[r].n_rot;

    float *q, *k, *v;
    if (l->fused_qkv) {
        q = s->f[Q] + (size_t)t * l->q.w.n_rows;
        k = q + l->n_head * D;
        v = k + l->n_head_kv * D;
    } else {
        q = s->f[Q] + (size_t)t * l->q.w.n_rows;
        k = s->f[K] + (size_t)t * l->k.w.n_rows;
        v = s->f[V] + (size_t)t * l->v.w.n_rows;
    }
    if (l->qk_norm == LLAMAY_QK_NORM_PROJECTION) {
        m->kernels->rms_norm(q, l->q_norm, l->n_head * D, m->norm_eps, q);
        m->kernels->rms_norm(k, l->k_norm, l->n_head_kv * D, m->norm_eps, k);
    }
    for (int h = 0; h < l->n_head; h++) {
        float *head = q + (size_t)h * D;
        if (l->qk_norm == LLAMAY_QK_NORM_HEAD) {
            m->kernels->rms_norm(head, l->q_norm, D, m->norm_eps, head);
        }
        if (rope != NULL) llamay_rope_apply(rope, cos_sin, head);
    }
    const int pos = st->b->positions[t];
    const int32_t page = st->b->page_tables[t][pos / st->kv->page_tokens];
    const int slot = pos % st->kv->page_tokens;
    for (int g = 0; g < l->n_head_kv; g++) {
        float *head = k + (size_t)g * D;
        if (l->qk_norm == LLAMAY_QK_NORM_HEAD) {
            m->kernels->rms_norm(head, l->k_norm, D, m->norm_eps, head);
        }
        if (rope != NULL) llamay_rope_apply(rope, cos_sin, head);
        unsigned char *k_row = llamay_page_k(st->kv, page, il, g) + slot * st->kv->row_bytes;
        unsigned char *v_row = llamay_page_v(st->kv, page, il, g) + slot * st->kv->row_bytes;
        if (st->kv->elem_bytes == 2) {
            uint16_t *kh = (uint16_t *)k_row, *vh = (uint16_t *)v_row;
            for (int d = 0; d < D; d++) {
                kh[d] = llamay_fp32_to_fp16(head[d]);
                vh[d] = llamay_fp32_to_fp16(v[(size_t)g * D + d]);
            }
        } else {
            memcpy(k_row, head, (size_t)D * sizeof(float));
            memcpy(v_row, v + (size_t)g * D, (size_t)D * sizeof(float));
        }
    }
}

/* Token t attends over its sequence's pages, every KV head in turn; then its output is
   quantized for the output projection. */
static void attend(const step *st, int il, int t) {
    const llamay_model *m = st->m;
    const llamay_layer *l = &m->layers[il];
    const int D = m->head_dim, group = l->n_head / l->n_head_kv;
    const float *q = st->s->f[Q] + (size_t)t * l->q.w.n_rows;
    float *out = st->s->f[ATTN] + (size_t)t * l->n_head * D;
    for (int g = 0; g < l->n_head_kv; g++) {
        const llamay_attention a = {
            .kv = st->kv,
            .page_table = st->b->page_tables[t],
            .layer = il,
            .kv_head = g,
            .n_q = group,
            .pos = st->b->positions[t],
            .window = l->window,
            .scale = m->attn_scale,
            .softcap = m->attn_softcap,
            .q = q + (size_t)g * group * D,
            .out = out + (size_t)g * group * D,
        };
        m->kernels->attention(&a);
    }
    quantize_row(st, &l->o, out, t);
}

/* proj[t] (the attention or FFN output) post-normed and scaled where the family does, added to
   x[t]. */
static void residual(const step *st, const llamay_layer *l, const float *post_norm, int t) {
    const llamay_model *m = st->m;
    float *proj = st->s->f[PROJ] + (size_t)t * m->n_embd;
    if (post_norm != NULL) {
        m->kernels->rms_norm(proj, post_norm, m->n_embd, m->norm_eps, proj);
    }
    if (l->residual_scale != 1.0f) {
        for (int i = 0; i < m->n_embd; i++) proj[i] *= l->residual_scale;
    }
    add(st->s->f[X] + (size_t)t * m->n_embd, proj, m->n_embd);
}

/* act(gate) * up for token t, over the gate, quantized for the down projection. */
static void activate(const step *st, const llamay_layer *l, int t) {
    const llamay_scratch *s = st->s;
    float *up = s->f[UP] + (size_t)t * l->up.w.n_rows;
    float *gate = l->fused_gate_up ? up : s->f[GATE] + (size_t)t * l->gate.w.n_rows;
    if (l->fused_gate_up) {
        up += l->n_ff;
    }
    st->m->kernels->gated(st->m->activation, gate, up, l->n_ff, gate);
    quantize_row(st, &l->down, gate, t);
}

#define MY_TOKENS(st, t) for (int t = (st)->thread; t < (st)->b->n_tokens; t += (st)->n_threads)

static void layer(const step *st, int il) {
    const llamay_layer *l = &st->m->layers[il];
    llamay_scratch *s = st->s;
    const int T = st->b->n_tokens;
    const llamay_linear *ls[3];
    int n_ls;

    qkv_inputs(l, ls, &n_ls);
    MY_TOKENS(st, t) norm_and_quantize(st, l->attn_norm, t, ls, n_ls);
#pragma omp barrier
    linear(st, &l->q, T, s->f[Q]);
    if (!l->fused_qkv) {
        linear(st, &l->k, T, s->f[K]);
        linear(st, &l->v, T, s->f[V]);
    }
#pragma omp barrier
    MY_TOKENS(st, t) rope_and_store(st, il, t);
#pragma omp barrier
    MY_TOKENS(st, t) attend(st, il, t);
#pragma omp barrier
    linear(st, &l->o, T, s->f[PROJ]);
#pragma omp barrier
    ffn_inputs(l, ls, &n_ls);
    MY_TOKENS(st, t) {
        residual(st, l, l->post_attn_norm, t);
        norm_and_quantize(st, l->ffn_norm, t, ls, n_ls);
    }
#pragma omp barrier
    linear(st, &l->up, T, s->f[UP]);
    if (!l->fused_gate_up) {
        linear(st, &l->gate, T, s->f[GATE]);
    }
#pragma omp barrier
    MY_TOKENS(st, t) activate(st, l, t);
#pragma omp barrier
    linear(st, &l->down, T, s->f[PROJ]);
#pragma omp barrier
    MY_TOKENS(st, t) residual(st, l, l->post_ffn_norm, t);
}

/* The final norm of the tokens whose logits are wanted, the output matmul into b->logits, then
   the bias and the soft-cap of the rows this thread computed. With b->hidden the normed rows
   themselves are the output (embeddings), and the output matmul is skipped. */
static void logits(const step *st) {
    const llamay_model *m = st->m;
    const llamay_batch *b = st->b;
    const llamay_linear *out = &m->output;
    for (int j = st->thread; j < b->n_logits; j += st->n_threads) {
        float *xn = b->hidden ? b->logits + (size_t)j * m->n_embd
                              : st->s->f[XN] + (size_t)j * m->n_embd;
        m->kernels->rms_norm(st->s->f[X] + (size_t)b->logit_tokens[j] * m->n_embd, m->output_norm,
                             m->n_embd, m->norm_eps, xn);
        if (!b->hidden) {
            quantize_row(st, out, xn, j);
        }
    }
    if (b->hidden) {
        return;
    }
#pragma omp barrier
    linear(st, out, b->n_logits, b->logits);
    int r0, r1;
    row_slice(st, out->w.n_rows, &r0, &r1);
    if (m->logit_scale != 1.0f) {
        for (int j = 0; j < b->n_logits; j++) {
            float *row = b->logits + (size_t)j * m->n_vocab;
            for (int r = r0; r < r1; r++) row[r] *= m->logit_scale;
        }
    }
    if (m->final_softcap != 0.0f && r1 > r0) {
        for (int j = 0; j < b->n_logits; j++) {
            m->kernels->softcap(b->logits + (size_t)j * m->n_vocab + r0, r1 - r0, m->final_softcap);
        }
    }
}

void llamay_forward(const llamay_model *m, const llamay_pages *kv, llamay_scratch *s,
                    const llamay_batch *b, int n_threads) {
    if (n_threads <= 0) {
        n_threads = omp_get_max_threads();
    }
#pragma omp parallel num_threads(n_threads)
    {
        const step st = {m, kv, s, b, omp_get_thread_num(), omp_get_num_threads()};
        MY_TOKENS(&st, t) {
            embed(&st, t);
            rope_angles(&st, t);
        }
        for (int il = 0; il < m->n_layer; il++) {
            layer(&st, il);
        }
        if (b->n_logits > 0) {
#pragma omp barrier
            logits(&st);
        }
    }
}
