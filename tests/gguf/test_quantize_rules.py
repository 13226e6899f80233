"""Which type each tensor gets (llamay.gguf.quantize.rules): llama-quantize's mixes, written
out for model shapes whose quantized files people know (Llama 3.2 1B's Q4_K_M among them)."""

from __future__ import annotations

import pytest

from llamay.gguf.quantize import UnsupportedQuantization, file_order, file_type
from llamay.gguf.quantize.rules import ModelFacts, Recipe, TensorShape, choose_types

ROLES = ("attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up")


def dense(n_layer: int, n_embd: int = 2048, n_ff: int = 8192, output: bool = False):
    """A llama's tensors, in file order: F16 matrices, F32 norms."""
    shapes = {"token_embd.weight": (n_embd, 1000), "output_norm.weight": (n_embd,)}
    if output:
        shapes["output.weight"] = (n_embd, 1000)
    for il in range(n_layer):
        for role in ROLES:
            rows, cols = (n_embd, n_ff) if role == "ffn_down" else (n_ff, n_embd)
            if role.startswith("attn"):
                rows = n_embd
            shapes[f"blk.{il}.{role}.weight"] = (cols, rows)
        shapes[f"blk.{il}.attn_norm.weight"] = (n_embd,)
        shapes[f"blk.{il}.ffn_norm.weight"] = (n_embd,)
    return [
        TensorShape(name, shapes[name], "F16" if len(shapes[name]) > 1 else "F32")
        for name in file_order(list(shapes))
    ]


def facts(n_layer: int, n_gqa: int = 4, n_expert: int = 0, arch: str = "llama", is_70b=False):
    return ModelFacts(arch, n_layer, n_gqa, n_expert, is_70b)


def types(tensors, facts_, name: str, **recipe) -> dict[str, str]:
    chosen = choose_types(tensors, facts_, Recipe(file_type(name), **recipe))
    return {t.name: chosen_type for t, chosen_type in zip(tensors, chosen, strict=True)}


def layers_with(chosen: dict[str, str], role: str, type_name: str) -> list[int]:
    return [il for il in range(100) if chosen.get(f"blk.{il}.{role}.weight") == type_name]


def test_file_order_is_by_layer_then_by_name():
    names = ["blk.10.attn_q.weight", "output.weight", "blk.2.ffn_up.weight", "blk.2.attn_k.weight",
             "token_embd.weight", "output_norm.weight"]  # fmt: skip
    assert file_order(names) == [
        "output.weight",
        "output_norm.weight",
        "token_embd.weight",
        "blk.2.attn_k.weight",
        "blk.2.ffn_up.weight",
        "blk.10.attn_q.weight",
    ]


def test_q4_k_m_of_llama_3_2_1b():
    chosen = types(dense(16), facts(16), "Q4_K_M")
    more_bits = [0, 1, 4, 7, 10, 13, 14, 15]  # first and last eighths, every third between
    assert layers_with(chosen, "attn_v", "Q6_K") == more_bits
    assert layers_with(chosen, "ffn_down", "Q6_K") == more_bits
    assert layers_with(chosen, "attn_v", "Q4_K") == sorted(set(range(16)) - set(more_bits))
    for role in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
        assert layers_with(chosen, role, "Q4_K") == list(range(16))
    assert chosen["token_embd.weight"] == "Q6_K"  # tied: it is the output matrix too
    assert chosen["output_norm.weight"] == "F32"
    assert chosen["blk.3.attn_norm.weight"] == "F32"


def test_an_untied_output_takes_q6_k_and_the_embeddings_the_default():
    chosen = types(dense(4, output=True), facts(4), "Q5_K_M")
    assert chosen["output.weight"] == "Q6_K"
    assert chosen["token_embd.weight"] == "Q5_K"


def test_q3_k_mixes():
    m = types(dense(32), facts(32), "Q3_K_M")
    assert layers_with(m, "attn_v", "Q5_K") == [0, 1]
    assert layers_with(m, "attn_v", "Q4_K") == list(range(2, 32))
    assert layers_with(m, "ffn_down", "Q5_K") == [0, 1]  # the first sixteenth
    assert layers_with(m, "ffn_down", "Q4_K") == list(range(2, 32))
    assert layers_with(m, "attn_output", "Q4_K") == list(range(32))
    assert layers_with(m, "attn_q", "Q3_K") == list(range(32))
    large = types(dense(8), facts(8), "Q3_K_L")
    assert {
        large[f"blk.{i}.{r}.weight"]
        for i in range(8)
        for r in ("attn_v", "ffn_down", "attn_output")
    } == {"Q5_K"}
    small = types(dense(8), facts(8), "Q3_K_S")
    assert {small[f"blk.{i}.{r}.weight"] for i in range(8) for r in ROLES} == {"Q3_K"}


def test_q2_k_gives_attn_v_q4_k_with_four_query_heads_per_kv_head():
    assert types(dense(2), facts(2, n_gqa=4), "Q2_K")["blk.0.attn_v.weight"] == "Q4_K"
    chosen = types(dense(2), facts(2, n_gqa=2), "Q2_K")
    assert chosen["blk.0.attn_v.weight"] == "Q3_K"
    assert chosen["blk.1.ffn_down.weight"] == chosen["blk.1.attn_output.weight"] == "Q3_K"
    assert chosen["blk.1.ffn_up.weight"] == "Q2_K"


def test_q4_k_s_and_q5_k_s():
    s = types(dense(16), facts(16), "Q4_K_S")
    assert layers_with(s, "attn_v", "Q5_K") == [0, 1, 2, 3]
    assert layers_with(s, "ffn_down", "Q5_K") == [0, 1]
    five = types(dense(16), facts(16), "Q5_K_S")
    assert {five[f"blk.{i}.{r}.weight"] for i in range(16) for r in ROLES} == {"Q5_K"}


def test_the_70b_shape_gives_attn_v_q5_k():
    chosen = types(dense(8), facts(8, is_70b=True), "Q3_K_S")
    assert layers_with(chosen, "attn_v", "Q5_K") == list(range(8))
    assert ModelFacts.of(_meta(n_layer=80, n_head=64, n_head_kv=8)).is_70b
    assert not ModelFacts.of(_meta(n_layer=80, n_head=64, n_head_kv=64)).is_70b  # 65B
    assert not ModelFacts.of(_meta(n_layer=32, n_head=64, n_head_kv=8)).is_70b


def _meta(n_layer: int, n_head: int, n_head_kv: int, arch: str = "llama") -> dict:
    return {
        "general.architecture": arch,
        f"{arch}.block_count": n_layer,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
    }


def test_model_facts_read_per_layer_head_counts_and_default_kv_heads():
    meta = _meta(4, 16, 4)
    meta["llama.attention.head_count_kv"] = [4, 2, 2, 2]
    assert ModelFacts.of(meta).n_gqa == 4  # the first layer's
    del meta["llama.attention.head_count_kv"]
    assert ModelFacts.of(meta).n_gqa == 1
    with pytest.raises(UnsupportedQuantization, match=r"no llama.block_count"):
        ModelFacts.of({"general.architecture": "llama"})


def test_rows_that_k_quants_do_not_fit_fall_back():
    narrow = types(dense(2, n_embd=160, n_ff=96), facts(2), "Q4_K_M")
    assert narrow["blk.0.attn_q.weight"] == "Q5_0"  # Q4_K's fallback
    assert narrow["blk.0.ffn_down.weight"] == "Q5_0"
    assert narrow["blk.1.ffn_down.weight"] == "Q8_0"  # Q6_K's (the last layer has more bits)
    assert narrow["token_embd.weight"] == "Q8_0"  # the output rule: rows not of 256
    five = types(dense(2, n_embd=160, n_ff=96), facts(2), "Q5_K_S")
    assert five["blk.1.ffn_up.weight"] == "Q5_1"
    odd = types(dense(2, n_embd=256, n_ff=80), facts(2), "Q4_K_M")
    assert odd["blk.1.ffn_down.weight"] == "F16"  # rows of 80: not even 32-element blocks
    assert types(dense(2, n_embd=256, n_ff=80), facts(2), "Q8_0")["blk.1.ffn_down.weight"] == "F16"


def moe(n_layer: int, n_expert: int):
    shapes = {"token_embd.weight": (256, 1000), "output.weight": (256, 1000)}
    for il in range(n_layer):
        for role in ("attn_q", "attn_k", "attn_v", "attn_output"):
            shapes[f"blk.{il}.{role}.weight"] = (256, 256)
        shapes[f"blk.{il}.ffn_gate_inp.weight"] = (256, n_expert)
        shapes[f"blk.{il}.ffn_gate_exps.weight"] = (256, 512, n_expert)
        shapes[f"blk.{il}.ffn_up_exps.weight"] = (256, 512, n_expert)
        shapes[f"blk.{il}.ffn_down_exps.weight"] = (512, 256, n_expert)
    return [
        TensorShape(name, shapes[name], "F32" if "gate_inp" in name else "F16")
        for name in file_order(list(shapes))
    ]


def test_mixtures_of_experts():
    eight = types(moe(4, 8), facts(4, n_expert=8), "Q4_K_M")
    assert (
        layers_with(eight, "attn_v", "Q8_0") == layers_with(eight, "attn_k", "Q8_0") == [0, 1, 2, 3]
    )
    assert layers_with(eight, "attn_output", "Q5_K") == [0, 1, 2, 3]
    assert layers_with(eight, "ffn_down_exps", "Q6_K") == [2, 3]  # by the layer in its name
    assert eight["blk.0.ffn_gate_inp.weight"] == "F32"  # the router stays as it is
    mxfp4 = types(moe(2, 4), facts(2, n_expert=4), "MXFP4_MOE")
    assert layers_with(mxfp4, "ffn_up_exps", "MXFP4") == [0, 1]
    assert layers_with(mxfp4, "attn_q", "Q8_0") == [0, 1]
    assert mxfp4["output.weight"] == mxfp4["token_embd.weight"] == "Q8_0"


def test_an_expert_tensor_without_a_layer_is_refused():
    tensors = [*moe(1, 4), TensorShape("ffn_down_exps.weight", (512, 256, 4), "F16")]
    with pytest.raises(UnsupportedQuantization, match="cannot tell the layer of tensor"):
        types(tensors, facts(1, n_expert=4), "Q4_K_M")


def test_options():
    tensors = dense(2, output=True)
    pure = types(tensors, facts(2), "Q4_K_M", pure=True)
    assert {pure[t.name] for t in tensors if len(t.shape) > 1} == {"Q4_K"}
    left = types(tensors, facts(2), "Q4_K_M", quantize_output=False)
    assert left["output.weight"] == "F16"
    named = types(tensors, facts(2), "Q4_K_M", output_type="Q8_0", token_embedding_type="Q4_0")
    assert (named["output.weight"], named["token_embd.weight"]) == ("Q8_0", "Q4_0")
    tied = types(dense(2), facts(2), "Q4_K_M", output_type="Q5_K")
    assert tied["token_embd.weight"] == "Q5_K"  # the tied embeddings follow the output's type
    with_imatrix = types(dense(16), facts(16), "Q4_0", has_imatrix=True)
    assert layers_with(with_imatrix, "ffn_down", "Q4_1") == [0, 1]
    assert types(dense(16), facts(16), "Q4_0")["blk.0.ffn_down.weight"] == "Q4_0"


@pytest.mark.parametrize("name", ["F16", "BF16", "F32"])
def test_float_file_types_convert_every_matrix_and_keep_vectors(name):
    chosen = types(dense(2, output=True), facts(2), name)
    assert chosen["output.weight"] == chosen["blk.1.ffn_down.weight"] == name
    assert chosen["output_norm.weight"] == "F32"


def test_unknown_and_declined_types_are_named():
    assert file_type("q4_k").name == "Q4_K_M" and file_type("Q3_K").name == "Q3_K_M"
    with pytest.raises(UnsupportedQuantization, match="llamay does not write IQ4_XS files"):
        file_type("iq4_xs")
    with pytest.raises(UnsupportedQuantization, match="unknown quantization type 'Q7'"):
        file_type("Q7")
