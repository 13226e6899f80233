"""BERT and nomic-bert: encoders for embeddings and reranking, as llama.cpp builds them
(src/models/bert.cpp).

Every token attends to every token of its sequence. The input is the token embedding plus
token type 0's row (llama.cpp hard-codes "sentence A") plus, for BERT, the learned position
embedding, LayerNormed with a bias (token_embd_norm). Each layer adds attention's output to its
input and LayerNorms the sum (attn_output_norm), then adds the FFN's output to that and
LayerNorms again (layer_output_norm); there is no output norm. BERT has biases on every
projection and a GELU FFN without a gate; nomic-bert a fused qkv without biases, NeoX RoPE and a
SwiGLU FFN. The pooling (mean, CLS, last, or rank: a cross-encoder's classification head, `cls`
and `cls.output`, on the first token) comes from {arch}.pooling_type.
"""

from __future__ import annotations

from llamay.models.family import Family

_ENCODER = {
    "norm": "layer",
    "norms": "post-add",
    "causal": False,
    "embedding_norm": True,
    "output_norm": False,
}
# the LayerNorms' biases, for the synthetic writer (token_embd_norm's too)
_NORM_BIASES = ("attn_output_norm", "layer_output_norm")

BERT = Family(
    "bert",
    **_ENCODER,
    positions="absolute",
    activation="gelu_tanh",
    gated_ffn=False,
    biases=("attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down", *_NORM_BIASES),
    models="all-MiniLM-L6/L12-v2, bge-small/base/large-en-v1.5, e5, gte-small/base; "
    "rerankers: bge-reranker-base/large, ms-marco-MiniLM cross-encoders, jina-reranker-v1-tiny",
)
NOMIC_BERT = Family(
    "nomic-bert",
    **_ENCODER,
    rope_neox=True,
    fused_qkv=True,
    biases=_NORM_BIASES,
    models="nomic-embed-text-v1, v1.5",
)

FAMILIES = (BERT, NOMIC_BERT)
