"""What sets one architecture's forward pass apart from Llama's, as llama.cpp builds it.

A family file (llama.py, qwen.py, gemma.py, phi3.py) is one `Family` value per architecture:
it says how the family differs and nothing else. The shared code (hparams.py, tensors.py and the
C forward step) does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """How one architecture's forward pass differs from Llama's in llama.cpp."""

    # llama_model_rope_type: Llama rotates adjacent pairs, the others rotate the two halves.
    rope_neox: bool = False
    # The FFN's gate activation: silu(gate) * up, or gelu_tanh(gate) * up (Gemma's GeGLU).
    activation: str = "silu"
    # Phi-3: ffn_up holds [gate; up] stacked (2 * n_ff rows) and there is no ffn_gate.
    fused_gate_up: bool = False
    # Gemma: token embeddings are multiplied by sqrt(n_embd).
    embedding_scale: bool = False
    # Gemma 2/3: RMS norms on the attention and FFN outputs, before each residual add.
    post_norms: bool = False
    # Qwen 3, Gemma 3: RMS norm over each query and key head (weights of head_dim) before RoPE.
    qk_norm: bool = False
    # Gemma: the output projection is always token_embd, even if output.weight exists.
    output_is_embedding: bool = False
    # set_swa_pattern(n): layer il uses the sliding window iff il % n < n - 1 (0: never).
    swa_period: int = 0
    # The window when {arch}.attention.sliding_window is absent (0: no sliding window then).
    swa_default_window: int = 0
    # Gemma 3: sliding layers rotate with base 10000 and no scaling (rope_freq_*_train_swa).
    swa_rope_base: float | None = None
    # Logit soft-caps, cap * tanh(x / cap). None: llama.cpp does not read the key for this
    # architecture; otherwise the default used when the key is absent (0: no cap).
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # Gemma 2/3 scale queries by 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim) for their
    # 27B model, which llama.cpp recognises by its layer count (LLM_TYPE_27B).
    layers_of_27b: int = 0
