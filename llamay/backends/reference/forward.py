"""A float64 forward step for every model family llamay runs, written after llama.cpp's graphs.

Plain and slow on purpose: one function per block, no quantized activations, every weight
dequantized to float64 once. It is the spec the CPU backend is checked against, so each
llama.cpp behaviour it copies says where it comes from. Sections follow the data: the blocks,
then the step that composes them over the KV pages.

A step runs layer by layer over all its tokens at once, but every token is computed on its own:
each matrix product is one matrix-vector product per token (`matmul` below: the same call for
a token whatever else is in the step), each norm and rotation works row by row, and each token attends
over its own sequence's pages. So a token's result never depends on the other tokens of its step:
the reference backend keeps the batch invariance every backend promises (base.py). (A plain
`x @ W.T` would not: BLAS computes a one-row product and a many-row one in different orders.)
"""

from __future__ import annotations

import math

import numpy as np

from llamay.backends.reference import rope as rope_mod
from llamay.models.spec import Block, ExpertLinear, Linear, ModelSpec, Moe

# ----------------------------------------------------------------------------------------------
# Blocks


def rms_norm(x: np.ndarray, weight: np.ndarray | None, eps: float) -> np.ndarray:
    """ggml_rms_norm then a multiply: x / sqrt(mean(x²) + eps) * weight, over the last axis.

    Gemma's (1 + weight) is already folded into the stored weights by llama.cpp's converter.
    """
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def layer_norm(x: np.ndarray, weight: np.ndarray | None, eps: float) -> np.ndarray:
    """ggml_norm then a multiply (Cohere's LayerNorm, no bias): (x - mean) / sqrt(var + eps)."""
    centred = x - np.mean(x, axis=-1, keepdims=True)
    y = centred / np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


NORMS = {"rms": rms_norm, "layer": layer_norm}


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


# ggml_swiglu_oai's constants, as llama.cpp's build_moe_ffn passes them for gpt-oss
SWIGLU_OAI_ALPHA = 1.702
SWIGLU_OAI_LIMIT = 7.0


def swiglu_oai(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """gpt-oss's clamped SwiGLU (ggml-cpu ops.cpp, swiglu_oai): the gate clamped above at the
    limit, the up projection to [-limit, limit], then gate * sigmoid(alpha gate) * (up + 1)."""
    x = np.minimum(gate, SWIGLU_OAI_LIMIT)
    y = np.clip(up, -SWIGLU_OAI_LIMIT, SWIGLU_OAI_LIMIT)
    return x / (1.0 + np.exp(-SWIGLU_OAI_ALPHA * x)) * (y + 1.0)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """ggml_gelu: the tanh approximation (ggml's CPU path also rounds x to fp16 for a table;
    the reference computes it exactly)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * x * (1.0 + 0.044715 * x * x)))


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh}


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    """Gemma 2's logit soft-cap: cap * tanh(x / cap)."""
    return cap * np.tanh(x / cap)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def attend(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    cap: float,
    sinks: np.ndarray | None = None,
) -> np.ndarray:
    """One token's attention over the keys and values it sees.

    q (n_head, d), k and v (n_visible, n_head_kv, d) -> (n_head * d). Query head h reads KV
    head h // (n_head / n_head_kv): ggml_mul_mat broadcasts K and V over consecutive query
    heads. Scores are q·k * scale, soft-capped when cap > 0 (llama-graph.cpp build_attn_mha
    caps kq, then ggml_soft_max_ext normalises). With sinks (gpt-oss), head h's softmax has
    one more logit, sinks[h], in its denominator and nothing to add to the output
    (ggml_soft_max_add_sinks).
    """
    group = q.shape[0] // k.shape[1]
    k = np.repeat(k, group, axis=1).transpose(1, 0, 2)  # (n_head, n_visible, d)
    v = np.repeat(v, group, axis=1).transpose(1, 0, 2)
    scores = np.matmul(k, q[:, :, None])[:, :, 0] * scale  # (n_head, n_visible)
    if cap:
        scores = softcap(scores, cap)
    top = scores.max(axis=-1, keepdims=True)
    if sinks is not None:
        top = np.maximum(top, sinks[:, None])
    probs = np.exp(scores - top)
    total = probs.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sinks[:, None] - top)
    probs /= total
    return np.matmul(probs[:, None, :], v)[:, 0, :].reshape(-1)


# ----------------------------------------------------------------------------------------------
# The step


def matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (T, K) @ w.T (w: N x K, contiguous), each row on its own: one BLAS matrix-vector
    product w @ x[t] per row, the same call (so the same bits) for a row alone or in a batch."""
    out = np.empty((x.shape[0], w.shape[0]))
    for t in range(x.shape[0]):
        np.dot(w, x[t], out=out[t])
    return out


class Weights:
    """The spec's tensors dequantized to float64, once, on first use."""

    def __init__(self) -> None:
        self._matrices: dict[str, np.ndarray] = {}

    def matrix(self, linear: Linear | ExpertLinear) -> np.ndarray:
        """A Linear's (n_rows, n_cols) matrix; an ExpertLinear's (n_expert, n_rows, n_cols)."""
        if linear.name not in self._matrices:
            m = linear.tensor.dequantize().astype(np.float64)
            shape = (linear.n_rows, linear.n_cols)
            if isinstance(linear, ExpertLinear):
                shape = (linear.n_expert, *shape)
            self._matrices[linear.name] = np.ascontiguousarray(m.reshape(shape))
        return self._matrices[linear.name]

    def apply(self, linear: Linear, x: np.ndarray) -> np.ndarray:
        """x @ W.T for each row of x, plus the bias when the file has one."""
        y = matmul(x, self.matrix(linear))
        return y if linear.bias is None else y + linear.bias

    def apply_expert(self, linear: ExpertLinear, e: int, x: np.ndarray) -> np.ndarray:
        """Expert e's W @ x for one token's x, plus its bias when the file has one."""
        y = self.matrix(linear)[e] @ x
        return y if linear.bias is None else y + linear.bias[e]


class ReferenceForward:
    """The model of `spec` over pages in a numpy array
    (n_pages, n_layers, 2, n_kv_heads, page_tokens, head_dim) of the KV dtype."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.hp = spec.hparams
        self.weights = Weights()
        self._embedding: np.ndarray | None = None

    def step(
        self,
        tokens: np.ndarray,
        positions: np.ndarray,
        tables: list[np.ndarray],
        kv: np.ndarray,
        outputs: np.ndarray,
        hidden: bool,
        last_positions: np.ndarray | None = None,
    ) -> np.ndarray:
        """Writes every token's K and V into its page in kv, layer by layer before any token
        of the layer attends, and returns the logits (or final-normed hidden states) of the
        tokens `outputs` indexes, in float64. tables[i] is token i's sequence's page table;
        last_positions[i] its sequence's last position in the step (what an encoder's token
        attends up to)."""
        spec, hp = self.spec, self.hp
        x = self._embed(tokens, positions)
        seen = positions if spec.causal or last_positions is None else last_positions
        for il, block in enumerate(spec.layers):
            x = self.block(il, block, x, positions, tables, kv, seen)
        x = x[outputs]
        if spec.output_norm is not None:  # BERT: none
            x = NORMS[spec.norm](x, spec.output_norm, hp.norm_eps)
        if hidden:
            return x
        logits = self.weights.apply(spec.output, x)
        if spec.logit_scale != 1.0:
            logits = logits * spec.logit_scale
        if hp.final_softcap:
            logits = softcap(logits, hp.final_softcap)
        return logits

    def _embed(self, tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The token embeddings, scaled; for an encoder (llama.cpp's bert.cpp) plus token type
        0's row, plus the learned position embeddings, then LayerNormed with a bias."""
        spec = self.spec
        if self._embedding is None:
            self._embedding = spec.token_embd.dequantize().astype(np.float64)
        x = self._embedding[tokens]
        x = x * spec.embd_scale if spec.embd_scale != 1.0 else x
        if spec.type_embd is not None:
            x = x + spec.type_embd
        if spec.pos_embd is not None:
            x = x + spec.pos_embd.dequantize().astype(np.float64)[positions]
        if spec.embd_norm is not None:
            x = self._norm_bias(x, spec.embd_norm)
        return x

    def _norm_bias(self, x: np.ndarray, norm: tuple[np.ndarray, np.ndarray | None]) -> np.ndarray:
        """build_norm with a bias: the norm times its weight, plus the bias."""
        y = NORMS[self.spec.norm](x, norm[0], self.hp.norm_eps)
        return y if norm[1] is None else y + norm[1]

    def block(
        self,
        il: int,
        b: Block,
        x: np.ndarray,
        positions: np.ndarray,
        tables: list[np.ndarray],
        kv: np.ndarray,
        seen: np.ndarray,
    ) -> np.ndarray:
        """One transformer layer: attention, then the FFN, each added back to the stream,
        norms before and/or after each as the block says. A parallel block (Cohere 2) feeds
        the FFN the same normed input as attention, and adds both: (x + ffn) + attn, in
        llama.cpp's order. BERT norms the stream itself after each add (post-add norms)."""
        eps, norm = self.hp.norm_eps, NORMS[self.spec.norm]
        h = x if b.attn_norm is None else norm(x, b.attn_norm, eps)
        a = self.weights.apply(b.o, self.attention(il, b, h, positions, tables, kv, seen))
        if b.post_attn_norm is not None:
            a = norm(a, b.post_attn_norm, eps)
        if b.parallel:
            return (x + self.ffn(b, h) * b.residual_scale) + a * b.residual_scale
        x = x + a * b.residual_scale
        if b.attn_out_norm is not None:
            x = self._norm_bias(x, b.attn_out_norm)
        h = x if b.ffn_norm is None else norm(x, b.ffn_norm, eps)
        f = self.ffn(b, h)
        if b.post_ffn_norm is not None:
            f = norm(f, b.post_ffn_norm, eps)
        x = x + f * b.residual_scale
        return x if b.layer_out_norm is None else self._norm_bias(x, b.layer_out_norm)

    def attention(
        self,
        il: int,
        b: Block,
        h: np.ndarray,
        positions: np.ndarray,
        tables: list[np.ndarray],
        kv: np.ndarray,
        seen: np.ndarray,
    ) -> np.ndarray:
        """q, k, v (from attn_q/k/v, or split from a fused attn_qkv: Phi-3's rows [q; k; v], as
        llama.cpp's build_qkv views them), q/k norms, RoPE; every token's K and V into its page,
        then each token's attention over every position it sees, read back from the pages. A
        key at p0 is visible from p1 iff p0 <= p1 and, on sliding-window layers, p1 - p0 <
        window (llama_hparams::is_masked_swa, STANDARD); an encoder's token sees its whole
        sequence (seen[t]: the sequence's last position; a decoder's: its own)."""
        hp, d, n = self.hp, self.spec.head_dim, len(positions)
        n_q, n_kv = b.n_head * d, b.n_head_kv * d
        if b.fused_qkv:
            q, k, v = np.split(self.weights.apply(b.q, h), [n_q, n_q + n_kv], axis=-1)
        else:
            q, k, v = (self.weights.apply(lin, h) for lin in (b.q, b.k, b.v))
        if b.qk_norm == "projection":  # OLMo 2: over all heads at once, before the split
            q, k = rms_norm(q, b.q_norm, hp.norm_eps), rms_norm(k, b.k_norm, hp.norm_eps)
        q = q.reshape(n, b.n_head, d)
        k = k.reshape(n, b.n_head_kv, d)
        v = v.reshape(n, b.n_head_kv, d)
        if b.qk_norm == "head":
            q, k = rms_norm(q, b.q_norm, hp.norm_eps), rms_norm(k, b.k_norm, hp.norm_eps)
        if b.rope >= 0:
            layer_rope = self.spec.ropes[b.rope]
            q = rope_mod.apply(q, layer_rope, positions)
            k = rope_mod.apply(k, layer_rope, positions)
        P = kv.shape[4]
        for t, (pos, table) in enumerate(zip(positions.tolist(), tables, strict=True)):
            kv[table[pos // P], il, 0, : b.n_head_kv, pos % P] = k[t]
            kv[table[pos // P], il, 1, : b.n_head_kv, pos % P] = v[t]
        out = np.empty((n, n_q))
        for t, (pos, table) in enumerate(zip(seen.tolist(), tables, strict=True)):
            first = max(0, pos - b.window + 1) if b.window else 0
            visible = np.arange(first, pos + 1)
            rows = kv[table[visible // P], il, :, : b.n_head_kv, visible % P].astype(np.float64)
            out[t] = attend(q[t], rows[:, 0], rows[:, 1], hp.attn_scale, hp.attn_softcap, b.sinks)
        return out

    def ffn(self, b: Block, h: np.ndarray) -> np.ndarray:
        """The layer's FFN: dense, or a mixture of experts plus its shared expert."""
        if b.moe is None:
            return self.dense_ffn(b, h)
        out = np.stack([self.experts(b.moe, row) for row in h])
        if b.has_ffn:
            shared = self.dense_ffn(b, h)
            if b.moe.shared_gate is not None:
                # Qwen 2 MoE: sigmoid, as llama.cpp computes it (silu(x) / x)
                g = self.weights.apply(b.moe.shared_gate, h)
                shared = shared * (silu(g) / g)
            out = out + shared
        return out

    def dense_ffn(self, b: Block, h: np.ndarray) -> np.ndarray:
        """Gated FFN: down(act(gate(h)) * up(h)). Phi-3 stacks gate over up in ffn_up
        (ggml_swiglu takes the first half as the gate)."""
        act = ACTIVATIONS[self.spec.activation]
        if not b.gated:  # BERT: down(act(up(h)))
            return self.weights.apply(b.down, act(self.weights.apply(b.up, h)))
        if b.fused_gate_up:
            gate, up = np.split(self.weights.apply(b.up, h), 2, axis=-1)
        else:
            gate, up = self.weights.apply(b.gate, h), self.weights.apply(b.up, h)
        return self.weights.apply(b.down, act(gate) * up)

    def experts(self, m: Moe, h: np.ndarray) -> np.ndarray:
        """llama.cpp's build_moe_ffn for one token: router logits; "softmax" gating takes the
        softmax over every expert and picks the top k of it, "softmax_weight" picks the top k
        logits and takes the softmax over those; renormalised where the family does (the sum
        clamped below at 2^-14, as llama.cpp clamps it); each chosen expert's
        down(act(gate(h)) * up(h)), biases before the activation, times its weight, summed in
        rank order (the best expert first; ties to the lower expert id)."""
        logits = self.weights.apply(m.router, h[None])[0]
        if m.gating == "softmax":
            probs = softmax(logits)
            chosen = np.argsort(-probs, kind="stable")[: m.n_used]
            weights = probs[chosen]
        else:
            chosen = np.argsort(-logits, kind="stable")[: m.n_used]
            weights = softmax(logits[chosen])
        if m.normalize:
            weights = weights / max(weights.sum(), 6.103515625e-5)
        out = np.zeros(m.down.n_rows)
        for e, weight in zip(chosen.tolist(), weights, strict=True):
            gate = self.weights.apply_expert(m.gate, e, h)
            up = self.weights.apply_expert(m.up, e, h)
            act = swiglu_oai(gate, up) if m.activation == "swiglu_oai" else silu(gate) * up
            out = out + weight * self.weights.apply_expert(m.down, e, act)
        return out
