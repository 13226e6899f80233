/* One forward step of a decoder-only transformer over a batch of tokens, in one parallel region
   (threads.h).

   The batch may mix tokens of several sequences; each token brings its position and its
   sequence's page table. The step writes every token's K and V into the pages first, then
   attends reading from the pages only, so a token's result does not depend on which tokens
   share its batch, on how a prompt was cut into steps, or on the thread count: threads split
   outputs (weight rows, tokens), never a reduction, and every reduction has one fixed order.

   The families differ only in the fields below, the block descriptor (NULL pointers, and the
   neutral values each field names, switch a part off); the Python side (llamay/models/spec.py)
   builds it from the family files and the GGUF file. */
#ifndef LLAMAY_FORWARD_H
#define LLAMAY_FORWARD_H

#include <stdint.h>

#include "kernels.h"
#include "matmul.h"
#include "pages.h"
#include "rope.h"

/* A weight matrix and its optional bias. */
typedef struct {
    llamay_weight w;
    const float *bias; /* w.n_rows floats, or NULL */
} llamay_linear;

/* How a layer normalises queries and keys before RoPE (RMS norm, with q_norm/k_norm weights). */
enum llamay_qk_norm {
    LLAMAY_QK_NORM_NONE = 0,
    LLAMAY_QK_NORM_HEAD = 1,       /* each head on its own: weights of head_dim (Qwen 3, Gemma 3) */
    LLAMAY_QK_NORM_PROJECTION = 2, /* all heads at once: n_head * head_dim weights (OLMo 2) */
};

/* How a mixture-of-experts router's weights come about (spec.py's Moe.gating). */
enum llamay_gating {
    LLAMAY_GATING_SOFTMAX = 0,        /* softmax over every expert, then the top k of it */
    LLAMAY_GATING_SOFTMAX_WEIGHT = 1, /* the top k logits, then the softmax over those k */
};

#define LLAMAY_MAX_EXPERTS 512

/* One projection of every expert: n_expert matrices of one shape and type, and their biases. */
typedef struct {
    llamay_weight *w;  /* n_expert of them */
    const float *bias; /* n_expert rows of w[0].n_rows floats, or NULL */
} llamay_experts;

/* A mixture-of-experts FFN (spec.py's Moe). Each token's n_used best experts, by the router,
   run on it; their outputs, each times its weight, are summed in rank order (the best first).
   A step groups its tokens by expert, so that an expert's rows are read once per step and only
   the chosen experts' rows are read at all; each output is still one dot product of one weight
   row and one token's activations, so grouping never changes a bit. */
typedef struct {
    int n_expert, n_used;
    int gating;     /* enum llamay_gating */
    int normalize;  /* the chosen weights divided by their sum (clamped below at 2^-14) */
    int activation; /* LLAMAY_SILU or LLAMAY_SWIGLU_OAI */
    llamay_linear router;       /* n_expert rows */
    llamay_experts gate, up, down;
    llamay_linear shared_gate;  /* one row: sigmoid(. x) scales the shared expert; n_rows 0: none */
} llamay_moe;

/* One layer: its weights and its block descriptor (llamay/models/spec.py's Block). */
typedef struct {
    const float *attn_norm;     /* n_embd; NULL: attention reads the residual stream unnormed */
    llamay_linear q, k, v;      /* fused_qkv: q holds the rows [q; k; v], k and v are unused */
    int fused_qkv;
    int qk_norm;                /* enum llamay_qk_norm */
    const float *q_norm;        /* see qk_norm; NULL with LLAMAY_QK_NORM_NONE */
    const float *k_norm;
    llamay_linear o;
    const float *post_attn_norm; /* on the attention output before the residual add; or NULL */
    const float *ffn_norm;       /* n_embd; NULL: the FFN reads the residual stream unnormed */
    /* The dense FFN, or the shared expert beside moe's experts (has_ffn 0: none). fused_gate_up:
       up holds [gate; up], gate is unused. */
    int has_ffn;
    llamay_linear gate, up, down;
    int fused_gate_up;
    const float *post_ffn_norm; /* or NULL */
    const llamay_moe *moe;      /* a mixture of experts (added to the dense FFN); NULL: none */
    int n_head, n_head_kv, n_ff;
    int window; /* sliding window: a query sees keys less than `window` positions back; 0: all */
    int rope;   /* which of the model's ropes; -1: none (a NoPE layer) */
    float residual_scale; /* multiplies the attention and FFN outputs before each add; 1: none */
    /* Parallel block (Cohere): the FFN reads attn_norm's output too, and the layer's output is
       (x + ffn) + attn; ffn_norm and the post-norms are unused. */
    int parallel;
    const float *sinks; /* n_head logits, each in its head's softmax denominator; or NULL */
    /* Post-add norms (BERT): the stream itself is normed, with a bias, after attention's
       residual add and after the FFN's; NULL: none (the biases may be NULL too). */
    const float *attn_out_norm, *attn_out_norm_b;
    const float *layer_out_norm, *layer_out_norm_b;
    int plain_ffn; /* the FFN is act(up), no gate (BERT); 0: act(gate) * up */
} llamay_layer;

#define LLAMAY_MAX_ROPES 2

/* Which norm the layers and the output use (query/key norms are always RMS). */
enum llamay_norm {
    LLAMAY_NORM_RMS = 0,
    LLAMAY_NORM_LAYER = 1, /* LayerNorm without bias (Cohere) */
};

typedef struct {
    int n_embd, n_layer, n_vocab, head_dim;
    int activation; /* enum llamay_activation */
    int norm;       /* enum llamay_norm */
    float norm_eps;
    float attn_scale;    /* multiplies q.k */
    float attn_softcap;  /* 0: none */
    float final_softcap; /* 0: none */
    float embd_scale;    /* multiplies the token embeddings; 1: none */
    float logit_scale;   /* multiplies the logits, before the soft-cap; 1: none */
    const uint8_t *tok_embd; /* n_vocab rows of n_embd, ggml type tok_embd_type */
    int tok_embd_type;
    const float *output_norm;
    llamay_linear output; /* n_vocab rows */
    int n_ropes;
    llamay_rope ropes[LLAMAY_MAX_ROPES];
    const llamay_layer *layers;
    const llamay_kernels *kernels;
    /* Encoders (BERT). bidirectional: a token attends to every position of its sequence up to
       the batch's last_positions[t] (every token of a sequence comes in one step), not only
       to earlier ones. type_embd (n_embd floats) and the pos_embd row of the token's position
       (n_pos rows of ggml type pos_embd_type) are added to its embedding, which embd_norm then
       LayerNorms (embd_norm_b its bias); NULL: none. output_norm NULL: no final norm. */
    int bidirectional;
    const float *type_embd;
    const uint8_t *pos_embd;
    int pos_embd_type, n_pos;
    const float *embd_norm, *embd_norm_b;
} llamay_model;

/* One step's tokens. Tokens of one sequence must come in position order, and the pages of
   every position up to each token's must exist (earlier positions hold their K/V). */
typedef struct {
    int n_tokens;
    const int32_t *tokens;
    const int32_t *positions;
    const int32_t *const *page_tables; /* per token: its sequence's page table */
    int n_logits;
    const int32_t *logit_tokens; /* batch indices whose logits are wanted */
    float *logits;               /* n_logits rows of n_vocab, or of n_embd with hidden */
    int hidden; /* nonzero: write those tokens' final-normed hidden states, not their logits */
    const int32_t *last_positions; /* per token: its sequence's last position in the step
                                      (read by bidirectional models only) */
    const uint8_t *embd_rows; /* NULL: tokens' rows are read from m->tok_embd; else token t's
                                 row of the table, already read, at t * its row bytes */
} llamay_batch;

typedef struct llamay_scratch llamay_scratch;

/* Buffers for steps of up to max_tokens tokens; NULL when memory runs out. Freeing them frees
   the kernels' own scratch on every thread as well (llamay_matmul_release_scratch): a model's
   close. */
llamay_scratch *llamay_scratch_new(const llamay_model *m, int max_tokens);
void llamay_scratch_free(llamay_scratch *s);
/* Bytes a scratch of max_tokens takes. */
size_t llamay_scratch_bytes(const llamay_model *m, int max_tokens);

/* The step; b->n_tokens <= the scratch's max_tokens. n_threads <= 0: one per CPU. */
void llamay_forward(const llamay_model *m, const llamay_pages *kv, llamay_scratch *s,
                    const llamay_batch *b, int n_threads);

#endif
