"""The families of tests/data/families read their hyperparameters and tensors as llama.cpp does.

Each case writes the family's synthetic model (llamay.models.synthetic, the writer the llama.cpp
comparisons use) and checks what the loader makes of it: which layers slide, which rotate, the
multipliers, the experts. The tensor names and metadata types are llama.cpp's: the same files
load in llama.cpp (tests/backends/test_families_llama_cpp.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from llamay import gguf
from llamay.gguf import ValueType
from llamay.models.hparams import from_metadata
from llamay.models.spec import model_spec

from helpers.tiny import write_tiny


def load(tmp_path, arch, metadata=None, **options):
    path = write_tiny(tmp_path / f"{arch}.gguf", arch, metadata=metadata, **options)
    gg = gguf.read(path)
    hp = from_metadata(gg.metadata)
    return gg, hp, model_spec(gg, hp, 256)


def ropes(spec) -> list[int]:
    return [layer.rope for layer in spec.layers]


def test_gpt_oss_slides_on_even_layers_with_sinks_and_experts(tmp_path):
    gg, hp, spec = load(tmp_path, "gpt-oss", {"gpt-oss.attention.sliding_window": 8}, n_layer=4)
    assert hp.swa_layers == (True, False, True, False)
    assert [b.window for b in spec.layers] == [8, 0, 8, 0]
    assert hp.ext_factor == 1.0 and spec.ropes[0].freq_scale == 1 / 32  # YaRN, factor 32
    assert spec.ropes[0].neox and len(spec.ropes) == 1
    block = spec.layers[0]
    assert block.sinks.shape == (4,) and block.moe is not None and not block.has_ffn
    assert (block.moe.gating, block.moe.activation, block.moe.normalize) == (
        "softmax_weight",
        "swiglu_oai",
        False,
    )
    assert block.moe.gate.bias.shape == (8, 96) and block.moe.router.bias.shape == (8,)
    assert block.ffn_norm is not None  # stored as post_attention_norm
    names = set(gg.tensors)
    for name in (
        "attn_sinks.weight",
        "post_attention_norm.weight",
        "ffn_gate_exps.bias",
        "ffn_down_exps.weight",
        "ffn_gate_inp.bias",
        "attn_output.bias",
    ):
        assert f"blk.0.{name}" in names
    assert "blk.0.ffn_norm.weight" not in names
    # the period and the sliding layers' base come from the file where it has them
    _, hp, spec = load(
        tmp_path,
        "gpt-oss",
        {
            "gpt-oss.attention.sliding_window": 8,
            "gpt-oss.attention.sliding_window_pattern": 4,
            "gpt-oss.rope.freq_base_swa": 5000.0,
        },
        n_layer=4,
    )
    assert hp.swa_layers == (True, True, True, False)
    assert [r.freq_base for r in spec.ropes] == [150000.0, 5000.0]
    assert ropes(spec) == [1, 1, 1, 0]


def test_cohere2_rotates_only_its_sliding_layers(tmp_path):
    _, hp, spec = load(tmp_path, "cohere2", {"cohere2.attention.sliding_window": 16}, n_layer=8)
    assert hp.swa_layers == (True, True, True, False) * 2
    assert ropes(spec) == [0, 0, 0, -1] * 2
    assert spec.norm == "layer" and hp.norm_eps == pytest.approx(1e-5)
    assert all(b.parallel and b.ffn_norm is None for b in spec.layers)
    assert spec.logit_scale == np.float32(0.25)  # multiplied, not divided
    assert spec.output.tensor is spec.token_embd


def test_smollm3_drops_rope_on_every_fourth_layer(tmp_path):
    _, _, spec = load(tmp_path, "smollm3", n_layer=8)
    assert ropes(spec) == [0, 0, 0, -1, 0, 0, 0, -1]


def test_olmo2_post_norms_and_projection_qk_norm_and_olmo3_windows(tmp_path):
    _, hp, spec = load(tmp_path, "olmo2", n_layer=4)
    b = spec.layers[0]
    assert b.attn_norm is None and b.ffn_norm is None
    assert b.post_attn_norm is not None and b.post_ffn_norm is not None
    assert b.qk_norm == "projection" and b.q_norm.shape == (64,) and b.k_norm.shape == (32,)
    assert not any(hp.swa_layers)
    meta = {
        "olmo2.attention.sliding_window": 12,
        "olmo2.rope.scaling.type": "yarn",
        "olmo2.rope.scaling.factor": 8.0,
    }
    _, hp, spec = load(tmp_path, "olmo2", meta, n_layer=4)
    assert hp.swa_layers == (True, True, True, False)
    global_rope, sliding_rope = spec.ropes
    assert (global_rope.ext_factor, global_rope.freq_scale) == (1.0, 1 / 8)
    # the sliding layers rotate without any scaling, YaRN's mscale included
    assert (sliding_rope.ext_factor, sliding_rope.freq_scale, sliding_rope.attn_factor) == (
        0.0,
        1.0,
        1.0,
    )
    assert ropes(spec) == [1, 1, 1, 0]


def test_granite_multipliers(tmp_path):
    meta = {"granite.attention.scale": 0.5, "granite.residual_scale": 0.25}
    _, hp, spec = load(tmp_path, "granite", meta)
    assert (hp.embd_scale, hp.attn_scale) == (4.0, 0.5)
    assert all(b.residual_scale == 0.25 for b in spec.layers)
    assert spec.logit_scale == np.float32(1) / np.float32(3)  # the logits divided by 3
    # llama.cpp skips a multiplier of 0 (its default when a key is missing)
    meta = {"granite.attention.scale": 0.0, "granite.residual_scale": 0.0}
    _, hp, spec = load(tmp_path, "granite", meta)
    assert hp.attn_scale == 1 / math.sqrt(16) and hp.residual_scale == 1.0
    _, hp, spec = load(tmp_path, "granite", {"granite.rope.scaling.finetuned": False})
    assert ropes(spec) == [-1, -1, -1]


@pytest.mark.parametrize(
    ("arch", "options", "gating", "normalize", "shared", "shared_gate"),
    [
        ("qwen3moe", {}, "softmax", True, False, False),
        ("qwen2moe", {}, "softmax", False, True, True),
        ("llama", {"n_expert": 8, "n_expert_used": 2}, "softmax", True, False, False),
        ("granitemoe", {"n_expert": 8}, "softmax", True, False, False),
        ("granitemoe", {"n_expert": 8, "n_ff_shexp": 48}, "softmax", True, True, False),
        ("gpt-oss", {}, "softmax_weight", False, False, False),
    ],
)
def test_experts(tmp_path, arch, options, gating, normalize, shared, shared_gate):
    _, hp, spec = load(tmp_path, arch, **options)
    assert (hp.n_expert, hp.n_expert_used) == (8, 2)
    for b in spec.layers:
        m = b.moe
        assert (m.n_expert, m.n_used, m.gating, m.normalize) == (8, 2, gating, normalize)
        assert (m.gate.n_expert, m.gate.n_rows, m.gate.n_cols) == (8, 96, 64)
        assert (m.down.n_rows, m.down.n_cols) == (64, 96)
        assert b.has_ffn == shared and (m.shared_gate is not None) == shared_gate
        if shared:
            assert b.n_ff == options.get("n_ff_shexp", 96)


def test_llama_without_experts_is_dense(tmp_path):
    _, hp, spec = load(tmp_path, "llama")
    assert hp.n_expert == 0 and all(b.moe is None and b.has_ffn for b in spec.layers)


def test_metadata_has_the_types_llama_cpp_checks(tmp_path):
    """llama.cpp's loader refuses a count stored as INT32 where it reads a UINT32."""
    path = write_tiny(tmp_path / "m.gguf", "qwen3moe")
    gg = gguf.read(path)
    for key in ("block_count", "expert_count", "expert_used_count", "context_length"):
        assert gg.value_type(f"qwen3moe.{key}") == ValueType.UINT32
    assert gg.value_type("qwen3moe.attention.layer_norm_rms_epsilon") == ValueType.FLOAT32
    assert gg.tensors["blk.0.ffn_gate_inp.weight"].type == "F32"  # as real files keep it
