/* The forward step (forward.h): scratch buffers, then the step itself, stage by stage.

   Inside the one parallel region, thread i of n owns tokens t with t % n == i for every
   per-token stage (norms, RoPE, KV writes, attention, activations, quantizing activations),
   and a contiguous slice of rows of every weight matrix. A barrier separates a stage from the
   next one that reads what another thread wrote. No output is ever summed across threads.

   A mixture-of-experts FFN (moe_ffn) routes each token, then groups the step's (token, expert)
   assignments by expert (one thread, a counting sort: by expert, then token, then rank), so that
   each chosen expert multiplies all of its tokens at once, threads splitting its rows, and an
   expert no token chose is never read; thread i of n owns assignments a with a % n == i for the
   per-assignment stages. A token's expert outputs are summed in its rank order. */
#include "forward.h"

#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "fp16.h"
#include "mathfn.h"
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
    FFN,     /* the FFN's output where PROJ holds attention's (parallel) or the experts' sum */
    ROUTER,  /* the router's logits: n_expert */
    SHARED,  /* the shared expert's gate logit: 1 */
    E_GATE,  /* the experts' gate projections, by assignment: n_used x n_ff_exp */
    E_UP,    /* the experts' up projections, by assignment: n_used x n_ff_exp */
    E_DOWN,  /* the experts' down projections, by assignment: n_used x n_embd */
    SPANS,   /* attention's spans computed on their own: SPAN_UNITS units, not rows a token */
    N_BUFFERS
};

struct llamay_scratch {
    int max_tokens;
    float *f[N_BUFFERS];
    uint8_t *act[4];     /* quantized activations, one buffer per enum llamay_act_kind */
    uint8_t *moe_act[4]; /* the experts' quantized inputs, by assignment in expert order */
    /* routing, n_used per token (assignment a = t * n_used + k is token t's k-th best):
       expert[a], weight[a]; row_of[a] its row in expert order, order[row] the assignment there;
       start[e] the first row of expert e (n_expert + 1 of them) */
    int32_t *expert, *row_of, *order, *start;
    float *weight;
};

#define ALIGN 64

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static void need_act(size_t act_bytes[4], const llamay_weight *w, size_t rows) {
    act_bytes[w->act_kind] = max_size(act_bytes[w->act_kind], w->act_row_bytes * rows);
}

/* The most experts and assignments per token of any layer (0 for a dense model). */
static void moe_sizes(const llamay_model *m, int *max_expert, int *max_used) {
    *max_expert = *max_used = 0;
    for (int il = 0; il < m->n_layer; il++) {
        const llamay_moe *e = m->layers[il].moe;
        if (e != NULL) {
            *max_expert = e->n_expert > *max_expert ? e->n_expert : *max_expert;
            *max_used = e->n_used > *max_used ? e->n_used : *max_used;
        }
    }
}

static int cos_sin_stride(const llamay_model *m) {
    int n = 0;
    for (int r = 0; r < m->n_ropes; r++) n += m->ropes[r].n_rot;
    return n;
}

/* A step of at most SPAN_TOKENS tokens may split attention by spans (attend_spans), into at
   most SPAN_UNITS (token, KV head, span) units. */
enum { SPAN_TOKENS = 16, SPAN_UNITS = 1024 };

/* Floats of one unit: its query heads' maxima, sums and outputs (the widest layer's group). */
static size_t span_floats(const llamay_model *m) {
    size_t n = 0;
    for (int il = 0; il < m->n_layer; il++) {
        const llamay_layer *l = &m->layers[il];
        n = max_size(n, (size_t)(l->n_head / l->n_head_kv) * ((size_t)m->head_dim + 2));
    }
    return n;
}

/* Bytes of every buffer for steps of max_tokens tokens. */
static void scratch_sizes(const llamay_model *m, int max_tokens, size_t bytes[N_BUFFERS],
                          size_t act_bytes[4], size_t moe_act_bytes[4]) {
    size_t floats[N_BUFFERS] = {0};
    const size_t T = (size_t)max_tokens;
    memset(act_bytes, 0, 4 * sizeof(size_t));
    memset(moe_act_bytes, 0, 4 * sizeof(size_t));
    floats[X] = floats[XN] = floats[PROJ] = floats[FFN] = (size_t)m->n_embd;
    floats[COS_SIN] = (size_t)cos_sin_stride(m);
    for (int il = 0; il < m->n_layer; il++) {
        const llamay_layer *l = &m->layers[il];
        floats[Q] = max_size(floats[Q], (size_t)l->q.w.n_rows);
        floats[ATTN] = max_size(floats[ATTN], (size_t)l->n_head * m->head_dim);
        need_act(act_bytes, &l->q.w, T);
        need_act(act_bytes, &l->o.w, T);
        if (!l->fused_qkv) {
            floats[K] = max_size(floats[K], (size_t)l->k.w.n_rows);
            floats[V] = max_size(floats[V], (size_t)l->v.w.n_rows);
            need_act(act_bytes, &l->k.w, T);
            need_act(act_bytes, &l->v.w, T);
        }
        if (l->has_ffn) {
            floats[UP] = max_size(floats[UP], (size_t)l->up.w.n_rows);
            need_act(act_bytes, &l->up.w, T);
            need_act(act_bytes, &l->down.w, T);
            if (!l->fused_gate_up && !l->plain_ffn) {
                floats[GATE] = max_size(floats[GATE], (size_t)l->gate.w.n_rows);
                need_act(act_bytes, &l->gate.w, T);
            }
        }
        const llamay_moe *e = l->moe;
        if (e != NULL) {
            const size_t n_ff_exp = (size_t)e->up.w[0].n_rows, used = (size_t)e->n_used;
            floats[ROUTER] = max_size(floats[ROUTER], (size_t)e->n_expert);
            floats[E_GATE] = max_size(floats[E_GATE], used * n_ff_exp);
            floats[E_UP] = max_size(floats[E_UP], used * n_ff_exp);
            floats[E_DOWN] = max_size(floats[E_DOWN], used * (size_t)m->n_embd);
            need_act(act_bytes, &e->router.w, T);
            need_act(moe_act_bytes, &e->gate.w[0], T * used);
            need_act(moe_act_bytes, &e->up.w[0], T * used);
            need_act(moe_act_bytes, &e->down.w[0], T * used);
            if (e->shared_gate.w.n_rows) {
                floats[SHARED] = 1;
                need_act(act_bytes, &e->shared_gate.w, T);
            }
        }
    }
    need_act(act_bytes, &m->output.w, T);
    for (int i = 0; i < N_BUFFERS; i++) {
        bytes[i] = round_up(floats[i] * T * sizeof(float));
    }
    bytes[SPANS] = round_up((size_t)SPAN_UNITS * span_floats(m) * sizeof(float));
}

/* Bytes of the routing arrays: four int32 arrays and one float array of max_tokens * max_used,
   and the experts' starts. */
static size_t routing_bytes(const llamay_model *m, int max_tokens) {
    int max_expert, max_used;
    moe_sizes(m, &max_expert, &max_used);
    const size_t n = (size_t)max_tokens * (size_t)max_used;
    return max_used ? 4 * round_up(n * 4) + round_up(((size_t)max_expert + 1) * 4) : 0;
}

size_t llamay_scratch_bytes(const llamay_model *m, int max_tokens) {
    size_t bytes[N_BUFFERS], act_bytes[4], moe_act_bytes[4], total = 0;
    scratch_sizes(m, max_tokens, bytes, act_bytes, moe_act_bytes);
    for (int i = 0; i < N_BUFFERS; i++) total += bytes[i];
    for (int k = 0; k < 4; k++) total += round_up(act_bytes[k]) + round_up(moe_act_bytes[k]);
    return total + routing_bytes(m, max_tokens);
}

llamay_scratch *llamay_scratch_new(const llamay_model *m, int max_tokens) {
    llamay_scratch *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    s->max_tokens = max_tokens;
    size_t bytes[N_BUFFERS], act_bytes[4], moe_act_bytes[4];
    scratch_sizes(m, max_tokens, bytes, act_bytes, moe_act_bytes);
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
        if (moe_act_bytes[k]) {
            s->moe_act[k] = aligned_alloc(ALIGN, round_up(moe_act_bytes[k]));
            ok = ok && s->moe_act[k] != NULL;
        }
    }
    int max_expert, max_used;
    moe_sizes(m, &max_expert, &max_used);
    if (max_used) {
        const size_t n = round_up((size_t)max_tokens * (size_t)max_used * 4);
        s->expert = aligned_alloc(ALIGN, n);
        s->row_of = aligned_alloc(ALIGN, n);
        s->order = aligned_alloc(ALIGN, n);
        s->weight = aligned_alloc(ALIGN, n);
        s->start = aligned_alloc(ALIGN, round_up(((size_t)max_expert + 1) * 4));
        ok = ok && s->expert && s->row_of && s->order && s->weight && s->start;
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
    llamay_matmul_release_scratch(); /* the kernels' own, on each thread */
    for (int i = 0; i < N_BUFFERS; i++) free(s->f[i]);
    for (int k = 0; k < 4; k++) {
        free(s->act[k]);
        free(s->moe_act[k]);
    }
    free(s->expert);
    free(s->row_of);
    free(s->order);
    free(s->weight);
    free(s->start);
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
    llamay_barrier *barrier; /* the team's, between stages (barrier.h) */
} step;

/* Every thread of the step waits here for the others. */
static void step_barrier(const step *st) { llamay_barrier_wait(st->barrier, st->n_threads); }

/* [begin, end) of n rows for this thread, in multiples of 16 so that the matmul kernels' row
   tiles stay whole (results do not depend on it either way). */
static void row_slice(const step *st, int n, int *begin, int *end) {
    llamay_thread_share(n, 16, st->thread, st->n_threads, begin, end);
}

/* Quantizes one row of x for w's kernel, into row t of its activation buffer. */
static void quantize_row(const step *st, const llamay_weight *w, const float *x, int t) {
    uint8_t *act = st->s->act[w->act_kind];
    llamay_quantize_activations(w, x, 0, 1, act + (size_t)t * w->act_row_bytes);
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

static void scale(float *x, float s, int n) {
    if (s != 1.0f) {
        for (int i = 0; i < n; i++) x[i] *= s;
    }
}

/* The model's norm (RMS or LayerNorm) of x into out (may be x). */
static void norm(const llamay_model *m, const float *x, const float *w, float *out) {
    if (m->norm == LLAMAY_NORM_LAYER) {
        m->kernels->layer_norm(x, w, m->n_embd, m->norm_eps, out);
    } else {
        m->kernels->rms_norm(x, w, m->n_embd, m->norm_eps, out);
    }
}

/* Row `row` of a table of n_embd-wide rows of ggml type `type_id`, dequantized into out. */
static void table_row(const step *st, const uint8_t *table, int type_id, int row, float *out) {
    const llamay_model *m = st->m;
    const llamay_quant_type *type = llamay_quant_type_of(type_id);
    const size_t row_bytes = (size_t)(m->n_embd / type->block_elems) * type->block_bytes;
    type->to_float[m->kernels->set](table + (size_t)row * row_bytes, out, m->n_embd);
}

/* A LayerNorm with a bias (BERT's): the norm times w, then plus b (ggml's order); out may
   be x. */
static void norm_bias(const llamay_model *m, const float *x, const float *w, const float *b,
                      float *out) {
    norm(m, x, w, out);
    if (b != NULL) add(out, b, m->n_embd);
}

/* Token t's row of the embedding table, dequantized, scaled where the family does; an
   encoder's token type and position rows added, and the sum normed. */
static void embed(const step *st, int t) {
    const llamay_model *m = st->m;
    float *x = st->s->f[X] + (size_t)t * m->n_embd;
    if (st->b->embd_rows != NULL) {
        table_row(st, st->b->embd_rows, m->tok_embd_type, t, x);
    } else {
        table_row(st, m->tok_embd, m->tok_embd_type, st->b->tokens[t], x);
    }
    scale(x, m->embd_scale, m->n_embd);
    if (m->type_embd != NULL) add(x, m->type_embd, m->n_embd);
    if (m->pos_embd != NULL) {
        float *row = st->s->f[XN] + (size_t)t * m->n_embd;
        table_row(st, m->pos_embd, m->pos_embd_type, st->b->positions[t], row);
        add(x, row, m->n_embd);
    }
    if (m->embd_norm != NULL) norm_bias(m, x, m->embd_norm, m->embd_norm_b, x);
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

/* The weights that read a layer's normed input, each act kind quantized once (at most: q, k,
   v, gate, up of a parallel block; the router, the shared gate, the shared expert's gate and
   up, the experts' gate and up). */
#define MAX_INPUTS 10
typedef struct {
    const llamay_weight *w[MAX_INPUTS];
    int n;
} inputs;

static void input(inputs *in, const llamay_weight *w) { in->w[in->n++] = w; }

/* x[t] normed into xn[t] (weight NULL: x[t] as it is) and quantized for the matmuls that read
   it (each act kind once). */
static void norm_and_quantize(const step *st, const float *weight, int t, const inputs *in) {
    const llamay_model *m = st->m;
    const float *x = st->s->f[X] + (size_t)t * m->n_embd;
    float *xn = st->s->f[XN] + (size_t)t * m->n_embd;
    if (weight != NULL) {
        norm(m, x, weight, xn);
    } else {
        memcpy(xn, x, (size_t)m->n_embd * sizeof(float));
    }
    int done = 0; /* bit per act kind */
    for (int i = 0; i < in->n; i++) {
        if (!(done >> in->w[i]->act_kind & 1)) {
            quantize_row(st, in->w[i], xn, t);
            done |= 1 << in->w[i]->act_kind;
        }
    }
}

static void attention_inputs(const llamay_layer *l, inputs *in) {
    in->n = 0;
    input(in, &l->q.w);
    if (!l->fused_qkv) {
        input(in, &l->k.w);
        input(in, &l->v.w);
    }
}

static void ffn_inputs(const llamay_layer *l, inputs *in) {
    if (l->has_ffn) {
        input(in, &l->up.w);
        if (!l->fused_gate_up && !l->plain_ffn) input(in, &l->gate.w);
    }
    const llamay_moe *e = l->moe;
    if (e != NULL) {
        input(in, &e->router.w);
        input(in, &e->gate.w[0]);
        input(in, &e->up.w[0]);
        if (e->shared_gate.w.n_rows) input(in, &e->shared_gate.w);
    }
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
        if (st->kv->type == LLAMAY_KV_F16) {
            uint16_t *kh = (uint16_t *)k_row, *vh = (uint16_t *)v_row;
            for (int d = 0; d < D; d++) {
                kh[d] = llamay_fp32_to_fp16(head[d]);
                vh[d] = llamay_fp32_to_fp16(v[(size_t)g * D + d]);
            }
        } else if (st->kv->type == LLAMAY_KV_Q8_0) {
            /* the scalar quantizer: every kernel set writes the same KV bytes */
            llamay_quantize_row_q8_0_ref(head, k_row, D);
            llamay_quantize_row_q8_0_ref(v + (size_t)g * D, v_row, D);
        } else {
            memcpy(k_row, head, (size_t)D * sizeof(float));
            memcpy(v_row, v + (size_t)g * D, (size_t)D * sizeof(float));
        }
    }
}

/* The position token t's attention reads up to: an encoder's token sees its whole sequence,
   and reads nothing else of the query's position. */
static int attention_pos(const step *st, int t) {
    return st->m->bidirectional ? st->b->last_positions[t] : st->b->positions[t];
}

/* Attention of n_q of token t's query heads that share KV head g, from the group's head h0,
   into the ATTN rows; or, with a span state, of that span alone, into the state (its maxima,
   sums and outputs). A (token, KV head, heads) triple, or a (token, KV head, span), is the unit
   that threads split: each head's result is the same bits whichever thread computes it and in
   whatever group or span split, so a decode step (one token) uses every thread on a deep
   context without the thread count touching a bit. */
static void attend(const step *st, int il, int t, int g, int h0, int n_q, float *state,
                   int span) {
    const llamay_model *m = st->m;
    const llamay_layer *l = &m->layers[il];
    const int D = m->head_dim, group = l->n_head / l->n_head_kv;
    const int head = g * group + h0; /* the first query head of the unit */
    const float *q = st->s->f[Q] + (size_t)t * l->q.w.n_rows;
    float *out = st->s->f[ATTN] + (size_t)t * l->n_head * D + (size_t)head * D;
    const llamay_attention a = {
        .kv = st->kv,
        .page_table = st->b->page_tables[t],
        .layer = il,
        .kv_head = g,
        .n_q = n_q,
        .pos = attention_pos(st, t),
        .window = l->window,
        .scale = m->attn_scale,
        .softcap = m->attn_softcap,
        .sinks = l->sinks != NULL ? l->sinks + head : NULL,
        .q = q + (size_t)head * D,
        .out = state != NULL ? state + 2 * n_q : out,
        .span_max = state,
        .span_sum = state != NULL ? state + n_q : NULL,
        .span = span,
    };
    m->kernels->attention(&a);
}

/* A step's attention split by spans: each token's spans, where its units start, and the
   tiles of all of them. */
typedef struct {
    int n_units;
    int64_t tiles;
    int first[SPAN_TOKENS], count[SPAN_TOKENS], offset[SPAN_TOKENS];
} span_plan;

/* Visible tiles of token t's span `span`, or of all of its spans (span -1) */
static int tiles_seen(const step *st, const llamay_layer *l, int t, int span) {
    int tile0, tile1;
    llamay_attention_tiles(attention_pos(st, t), l->window, st->kv->page_tokens, span, &tile0,
                           &tile1);
    return tile1 - tile0 + 1;
}

/* The thread of a span unit: the plan's units in (token, KV head, span) order, in runs of
   about equal tiles, one run per thread; a unit goes to the thread whose share holds its
   middle (`before`: the tiles of the units ahead of it). */
static int span_owner(const step *st, const span_plan *p, int64_t before, int tiles) {
    return (int)((2 * before + tiles) * st->n_threads / (2 * p->tiles));
}

/* The query heads of part `part` of a group's, parts of per_part heads (the last one fewer,
   or none) */
static int part_heads(int part, int per_part, int group) {
    const int h0 = part * per_part;
    return h0 >= group ? 0 : group - h0 < per_part ? group - h0 : per_part;
}

/* The query heads a thread computes in whole-pair units (pairs, or parts of their query heads
   where there are fewer pairs than threads), times their tiles, on the busiest thread. */
static int64_t busiest_by_pairs(const step *st, const llamay_layer *l, int parts) {
    const int T = st->b->n_tokens, n_kv = l->n_head_kv, group = l->n_head / n_kv;
    const int per_part = (group + parts - 1) / parts;
    int64_t load[64] = {0}, busiest = 0;
    for (int u = 0; u < T * n_kv * parts; u++) {
        const int n_q = part_heads(u % parts, per_part, group);
        int64_t *mine = &load[u % st->n_threads];
        *mine += (int64_t)n_q * tiles_seen(st, l, u / parts / n_kv, -1);
        busiest = *mine > busiest ? *mine : busiest;
    }
    return busiest;
}

/* Parts a (token, KV head) pair's query heads go in: more than one where there are fewer
   pairs than threads (a decode step of a model with few KV heads), so every thread has one. */
static int pair_parts(const step *st, const llamay_layer *l) {
    const int T = st->b->n_tokens, n_kv = l->n_head_kv, group = l->n_head / n_kv;
    int parts = 1;
    while (T * n_kv * parts < st->n_threads && parts < group) parts++;
    return parts;
}

/* Whether a step's attention goes by (token, KV head, span) units: with more than one thread,
   a few tokens whose (token, KV head) pairs do not share out evenly among the threads
   (SmolLM2's five KV heads or Gemma 3's one on two threads), one of them deeper than a span,
   and the busiest thread no busier than with whole pairs, or parts of them, give or take an
   eighth (spans read each page once; parts of a pair each read all of its pages). Up to 64
   threads, the loads it compares. */
static int plan_spans(const step *st, const llamay_layer *l, span_plan *p) {
    const int T = st->b->n_tokens, n_kv = l->n_head_kv, group = l->n_head / n_kv;
    if (st->n_threads == 1 || st->n_threads > 64 || T > SPAN_TOKENS ||
        T * n_kv % st->n_threads == 0) {
        return 0;
    }
    int deep = 0;
    p->n_units = 0;
    p->tiles = 0;
    for (int t = 0; t < T; t++) {
        int last;
        llamay_attention_spans(attention_pos(st, t), l->window, st->kv->page_tokens,
                               &p->first[t], &last);
        p->count[t] = last - p->first[t] + 1;
        p->offset[t] = p->n_units;
        p->n_units += n_kv * p->count[t];
        p->tiles += (int64_t)n_kv * tiles_seen(st, l, t, -1);
        deep |= p->count[t] > 1;
    }
    if (!deep || p->n_units > SPAN_UNITS) {
        return 0;
    }
    int64_t load[64] = {0}, busiest = 0, before = 0;
    for (int t = 0; t < T; t++) {
        for (int g = 0; g < n_kv; g++) {
            for (int k = 0; k < p->count[t]; k++) {
                const int tiles = tiles_seen(st, l, t, p->first[t] + k);
                int64_t *mine = &load[span_owner(st, p, before, tiles)];
                *mine += (int64_t)group * tiles;
                busiest = *mine > busiest ? *mine : busiest;
                before += tiles;
            }
        }
    }
    return 8 * busiest <= 9 * busiest_by_pairs(st, l, pair_parts(st, l));
}

/* This thread's units of the plan, each span's state into the SPANS buffer, for merge_spans. */
static void attend_spans(const step *st, int il, const span_plan *p) {
    const llamay_layer *l = &st->m->layers[il];
    const int n_kv = l->n_head_kv, group = l->n_head / n_kv;
    const size_t unit = (size_t)group * ((size_t)st->m->head_dim + 2);
    int64_t before = 0;
    int u = 0;
    for (int t = 0; t < st->b->n_tokens; t++) {
        for (int g = 0; g < n_kv; g++) {
            for (int k = 0; k < p->count[t]; k++, u++) {
                const int span = p->first[t] + k, tiles = tiles_seen(st, l, t, span);
                if (span_owner(st, p, before, tiles) == st->thread) {
                    attend(st, il, t, g, 0, group, st->s->f[SPANS] + (size_t)u * unit, span);
                }
                before += tiles;
            }
        }
    }
}

/* Token t's spans folded into its ATTN row. */
static void merge_spans(const step *st, int il, const span_plan *p, int t) {
    const llamay_layer *l = &st->m->layers[il];
    const int D = st->m->head_dim, n_kv = l->n_head_kv, group = l->n_head / n_kv;
    const size_t unit = (size_t)group * ((size_t)D + 2);
    float *out = st->s->f[ATTN] + (size_t)t * l->n_head * D;
    for (int g = 0; g < n_kv; g++) {
        const float *spans = st->s->f[SPANS] + (size_t)(p->offset[t] + g * p->count[t]) * unit;
        st->m->kernels->attention_merge(p->count[t], group, D, spans, unit,
                                        out + (size_t)g * group * D);
    }
}

/* proj[t] (the attention or FFN output) post-normed and scaled where the family does, added to
   x[t]; then x[t] itself normed where the family norms after the add (BERT: add_norm with its
   bias add_norm_b). */
static void residual(const step *st, const llamay_layer *l, const float *post_norm,
                     const float *add_norm, const float *add_norm_b, int t) {
    const llamay_model *m = st->m;
    float *proj = st->s->f[PROJ] + (size_t)t * m->n_embd;
    float *x = st->s->f[X] + (size_t)t * m->n_embd;
    if (post_norm != NULL) {
        norm(m, proj, post_norm, proj);
    }
    scale(proj, l->residual_scale, m->n_embd);
    add(x, proj, m->n_embd);
    if (add_norm != NULL) norm_bias(m, x, add_norm, add_norm_b, x);
}

/* act(gate) * up for token t, over the gate (act(up) over up for a plain FFN), quantized
   for the down projection. */
static void activate(const step *st, const llamay_layer *l, int t) {
    const llamay_scratch *s = st->s;
    float *up = s->f[UP] + (size_t)t * l->up.w.n_rows;
    if (l->plain_ffn) {
        st->m->kernels->gated(st->m->activation, up, NULL, l->n_ff, up);
        quantize_row(st, &l->down.w, up, t);
        return;
    }
    float *gate = l->fused_gate_up ? up : s->f[GATE] + (size_t)t * l->gate.w.n_rows;
    if (l->fused_gate_up) {
        up += l->n_ff;
    }
    st->m->kernels->gated(st->m->activation, gate, up, l->n_ff, gate);
    quantize_row(st, &l->down.w, gate, t);
}

#define MY_TOKENS(st, t) for (int t = (st)->thread; t < (st)->b->n_tokens; t += (st)->n_threads)
/* this thread's share of n independent units (experts' rows, attention heads), interleaved */
#define MY_ROWS(st, i, n) for (int i = (st)->thread; i < (n); i += (st)->n_threads)

/* ---- mixture of experts ---- */

/* ggml_soft_max over n values, in place: e^(x - max) in fp32, their sum in double, times
   1/sum in fp32. */
static void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = (float)llamay_exp_d((double)(x[i] - max));
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* Token t's n_used experts, best first (ties to the lower id), and their weights, from its
   router logits, as llama.cpp's build_moe_ffn computes them (in double where ggml sums in
   double: the softmaxes' denominators and the renormalising sum). */
static void route(const step *st, const llamay_moe *e, int t) {
    const llamay_scratch *s = st->s;
    const int n = e->n_expert, k_used = e->n_used;
    float *logits = s->f[ROUTER] + (size_t)t * n;
    int32_t *expert = s->expert + (size_t)t * k_used;
    float *weight = s->weight + (size_t)t * k_used;
    if (e->gating == LLAMAY_GATING_SOFTMAX) {
        softmax(logits, n);
    }
    /* the top k: k passes over the experts, each taking the best one not yet taken */
    uint64_t taken[LLAMAY_MAX_EXPERTS / 64] = {0};
    for (int k = 0; k < k_used; k++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (!(taken[i >> 6] >> (i & 63) & 1) && (best < 0 || logits[i] > logits[best])) {
                best = i;
            }
        }
        taken[best >> 6] |= (uint64_t)1 << (best & 63);
        expert[k] = best;
        weight[k] = logits[best];
    }
    if (e->gating == LLAMAY_GATING_SOFTMAX_WEIGHT) {
        softmax(weight, k_used); /* over the chosen logits */
    }
    if (e->normalize) {
        double sum = 0.0;
        for (int k = 0; k < k_used; k++) sum += weight[k];
        float total = (float)sum;
        total = total < 6.103515625e-5f ? 6.103515625e-5f : total; /* ggml_clamp: F16's least */
        for (int k = 0; k < k_used; k++) weight[k] /= total;
    }
}

/* The step's assignments in expert order (then token, then rank): one thread's counting sort. */
static void group_by_expert(const step *st, const llamay_moe *e) {
    llamay_scratch *s = st->s;
    const int n_assign = st->b->n_tokens * e->n_used;
    int32_t *start = s->start;
    memset(start, 0, ((size_t)e->n_expert + 1) * sizeof(int32_t));
    for (int a = 0; a < n_assign; a++) start[s->expert[a] + 1]++;
    for (int i = 0; i < e->n_expert; i++) start[i + 1] += start[i];
    /* row_of[a] counts up from each expert's start; start[] is restored after */
    for (int a = 0; a < n_assign; a++) {
        const int row = start[s->expert[a]]++;
        s->row_of[a] = row;
        s->order[row] = a;
    }
    for (int i = e->n_expert; i > 0; i--) start[i] = start[i - 1];
    start[0] = 0;
}

/* Row `row` of the experts' inputs: its token's quantized input, for each act kind the experts
   read (copied, so that each expert's tokens are consecutive rows). */
static void gather(const step *st, const llamay_moe *e, int row) {
    const int t = st->s->order[row] / e->n_used;
    const llamay_weight *ws[2] = {&e->gate.w[0], &e->up.w[0]};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && ws[1]->act_kind == ws[0]->act_kind) break;
        const size_t bytes = ws[i]->act_row_bytes;
        memcpy(st->s->moe_act[ws[i]->act_kind] + (size_t)row * bytes,
               st->s->act[ws[i]->act_kind] + (size_t)t * bytes, bytes);
    }
}

/* This thread's rows of every chosen expert's matrix over that expert's tokens, into out (one
   row of w[0].n_rows floats per assignment, in expert order). Experts no token chose are not
   read. */
static void expert_matmul(const step *st, const llamay_moe *e, const llamay_experts *x,
                          float *out) {
    const int32_t *start = st->s->start;
    const uint8_t *act = st->s->moe_act[x->w[0].act_kind];
    const size_t act_bytes = x->w[0].act_row_bytes, n_rows = (size_t)x->w[0].n_rows;
    int r0, r1;
    row_slice(st, x->w[0].n_rows, &r0, &r1);
    for (int i = 0; i < e->n_expert; i++) {
        const int n = start[i + 1] - start[i];
        if (n == 0 || r1 <= r0) continue;
        llamay_matmul(&x->w[i], act + (size_t)start[i] * act_bytes, n,
                      out + (size_t)start[i] * n_rows, r0, r1);
    }
}

/* Row `row`'s expert: biases, act(gate) * up over the gate, quantized for the down projection. */
static void expert_activate(const step *st, const llamay_moe *e, int row) {
    const llamay_scratch *s = st->s;
    const int expert = s->expert[s->order[row]], n_ff = e->up.w[0].n_rows;
    float *gate = s->f[E_GATE] + (size_t)row * n_ff, *up = s->f[E_UP] + (size_t)row * n_ff;
    if (e->gate.bias != NULL) add(gate, e->gate.bias + (size_t)expert * n_ff, n_ff);
    if (e->up.bias != NULL) add(up, e->up.bias + (size_t)expert * n_ff, n_ff);
    st->m->kernels->gated(e->activation, gate, up, n_ff, gate);
    const llamay_weight *down = &e->down.w[0];
    llamay_quantize_activations(down, gate, 0, 1,
                                s->moe_act[down->act_kind] + (size_t)row * down->act_row_bytes);
}

/* Token t's experts' outputs (each with its down bias, times its weight), summed in rank order,
   into out[t]; then the shared expert (in shared[t]), scaled by its gate where there is one,
   added: llama.cpp's order of operations, each product and sum rounded to fp32. */
static void combine(const step *st, const llamay_layer *l, int t, const float *shared, float *out) {
    const llamay_model *m = st->m;
    const llamay_moe *e = l->moe;
    const llamay_scratch *s = st->s;
    const int n = m->n_embd;
    float *o = out + (size_t)t * n;
    for (int k = 0; k < e->n_used; k++) {
        const int a = t * e->n_used + k, expert = s->expert[a];
        const float w = s->weight[a];
        float *d = s->f[E_DOWN] + (size_t)s->row_of[a] * n;
        if (e->down.bias != NULL) add(d, e->down.bias + (size_t)expert * n, n);
        for (int i = 0; i < n; i++) {
            const float y = d[i] * w;
            o[i] = k == 0 ? y : o[i] + y;
        }
    }
    if (!l->has_ffn) {
        return;
    }
    const float *sh = shared + (size_t)t * n;
    if (e->shared_gate.w.n_rows) {
        /* Qwen 2 MoE's sigmoid, as llama.cpp builds it: silu(x) / x */
        const float g = s->f[SHARED][t];
        const float gate = g / (1.0f + (float)llamay_exp_d(-(double)g)) / g;
        for (int i = 0; i < n; i++) o[i] += sh[i] * gate;
    } else {
        add(o, sh, n);
    }
}

/* The layer's FFN from the quantized normed input (norm_and_quantize with ffn_inputs), into
   out: the dense FFN, or the experts plus the shared expert. Ends with a barrier. */
static void ffn(const step *st, const llamay_layer *l, float *out) {
    llamay_scratch *s = st->s;
    const int T = st->b->n_tokens;
    const llamay_moe *e = l->moe;
    /* the dense FFN (or shared expert) goes to FFN when the experts' sum is `out` */
    float *dense_out = e != NULL ? s->f[FFN] : out;
    if (l->has_ffn) {
        linear(st, &l->up, T, s->f[UP]);
        if (!l->fused_gate_up && !l->plain_ffn) linear(st, &l->gate, T, s->f[GATE]);
    }
    if (e != NULL) {
        linear(st, &e->router, T, s->f[ROUTER]);
        if (e->shared_gate.w.n_rows) linear(st, &e->shared_gate, T, s->f[SHARED]);
        step_barrier(st);
        MY_TOKENS(st, t) route(st, e, t);
        step_barrier(st);
        if (st->thread == 0) group_by_expert(st, e);
        step_barrier(st);
        const int n_rows = T * e->n_used;
        MY_ROWS(st, i, n_rows) gather(st, e, i);
        step_barrier(st);
        /* the shared expert's activation overwrites the dense act buffers, which the gather
           had to read first */
        if (l->has_ffn) MY_TOKENS(st, t) activate(st, l, t);
        expert_matmul(st, e, &e->gate, s->f[E_GATE]);
        expert_matmul(st, e, &e->up, s->f[E_UP]);
        step_barrier(st);
        if (l->has_ffn) linear(st, &l->down, T, dense_out);
        MY_ROWS(st, i, n_rows) expert_activate(st, e, i);
        step_barrier(st);
        expert_matmul(st, e, &e->down, s->f[E_DOWN]);
        step_barrier(st);
        MY_TOKENS(st, t) combine(st, l, t, dense_out, out);
        step_barrier(st);
        return;
    }
    step_barrier(st);
    MY_TOKENS(st, t) activate(st, l, t);
    step_barrier(st);
    linear(st, &l->down, T, out);
    step_barrier(st);
}

/* ---- the layer ---- */

static void layer(const step *st, int il) {
    const llamay_layer *l = &st->m->layers[il];
    llamay_scratch *s = st->s;
    const int T = st->b->n_tokens, n_embd = st->m->n_embd;
    inputs in;

    attention_inputs(l, &in);
    if (l->parallel) {
        ffn_inputs(l, &in); /* the FFN reads attention's normed input */
    }
    MY_TOKENS(st, t) norm_and_quantize(st, l->attn_norm, t, &in);
    step_barrier(st);
    if (l->parallel) {
        /* the FFN first, while the act buffers hold the normed input */
        ffn(st, l, s->f[FFN]);
        /* the q, k, v act rows may share a kind with the FFN's down projection's: quantize
           the normed input again (the same bits) */
        attention_inputs(l, &in);
        MY_TOKENS(st, t) {
            int done = 0;
            const float *xn = s->f[XN] + (size_t)t * n_embd;
            for (int i = 0; i < in.n; i++) {
                if (!(done >> in.w[i]->act_kind & 1)) {
                    quantize_row(st, in.w[i], xn, t);
                    done |= 1 << in.w[i]->act_kind;
                }
            }
        }
        step_barrier(st);
    }
    linear(st, &l->q, T, s->f[Q]);
    if (!l->fused_qkv) {
        linear(st, &l->k, T, s->f[K]);
        linear(st, &l->v, T, s->f[V]);
    }
    step_barrier(st);
    MY_TOKENS(st, t) rope_and_store(st, il, t);
    step_barrier(st);
    span_plan plan;
    const int by_spans = plan_spans(st, l, &plan);
    if (by_spans) {
        attend_spans(st, il, &plan);
    } else {
        const int n_kv = l->n_head_kv, group = l->n_head / n_kv, parts = pair_parts(st, l);
        const int per_part = (group + parts - 1) / parts;
        MY_ROWS(st, u, T * n_kv * parts) {
            const int n_q = part_heads(u % parts, per_part, group);
            if (n_q > 0) {
                attend(st, il, u / parts / n_kv, u / parts % n_kv, u % parts * per_part, n_q,
                       NULL, 0);
            }
        }
    }
    step_barrier(st);
    MY_TOKENS(st, t) {
        if (by_spans) merge_spans(st, il, &plan, t);
        quantize_row(st, &l->o.w, s->f[ATTN] + (size_t)t * l->n_head * st->m->head_dim, t);
    }
    step_barrier(st);
    linear(st, &l->o, T, s->f[PROJ]);
    step_barrier(st);
    if (l->parallel) {
        /* (x + ffn) + attn, in llama.cpp's order */
        MY_TOKENS(st, t) {
            float *x = s->f[X] + (size_t)t * n_embd;
            float *f = s->f[FFN] + (size_t)t * n_embd, *a = s->f[PROJ] + (size_t)t * n_embd;
            scale(f, l->residual_scale, n_embd);
            scale(a, l->residual_scale, n_embd);
            add(x, f, n_embd);
            add(x, a, n_embd);
        }
        return;
    }
    in.n = 0;
    ffn_inputs(l, &in);
    MY_TOKENS(st, t) {
        residual(st, l, l->post_attn_norm, l->attn_out_norm, l->attn_out_norm_b, t);
        norm_and_quantize(st, l->ffn_norm, t, &in);
    }
    step_barrier(st);
    ffn(st, l, s->f[PROJ]);
    MY_TOKENS(st, t) residual(st, l, l->post_ffn_norm, l->layer_out_norm, l->layer_out_norm_b, t);
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
        const float *x = st->s->f[X] + (size_t)b->logit_tokens[j] * m->n_embd;
        if (m->output_norm != NULL) {
            norm(m, x, m->output_norm, xn);
        } else {
            memcpy(xn, x, (size_t)m->n_embd * sizeof(float)); /* BERT: no final norm */
        }
        if (!b->hidden) {
            quantize_row(st, &out->w, xn, j);
        }
    }
    if (b->hidden) {
        return;
    }
    step_barrier(st);
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

/* What the threads of a step share. */
typedef struct {
    const llamay_model *m;
    const llamay_pages *kv;
    llamay_scratch *s;
    const llamay_batch *b;
    llamay_barrier barrier;
} step_region;

static void run_step(void *arg, int thread, int n_threads) {
    step_region *r = arg;
    const step st = {r->m, r->kv, r->s, r->b, thread, n_threads, &r->barrier};
    MY_TOKENS(&st, t) {
        embed(&st, t);
        rope_angles(&st, t);
    }
    for (int il = 0; il < r->m->n_layer; il++) {
        layer(&st, il);
    }
    if (r->b->n_logits > 0) {
        step_barrier(&st);
        logits(&st);
    }
}

void llamay_forward(const llamay_model *m, const llamay_pages *kv, llamay_scratch *s,
                    const llamay_batch *b, int n_threads) {
    if (n_threads <= 0) {
        n_threads = llamay_cpu_count();
    }
    step_region region = {m, kv, s, b, llamay_barrier_make(n_threads)};
    llamay_parallel(n_threads, run_step, &region);
}
