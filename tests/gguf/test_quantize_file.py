"""Quantizing a file (llamay.gguf.quantize): streamed on every thread to the same bytes, written
whole or not at all, and refusing in one line what llama-quantize refuses."""

from __future__ import annotations

import numpy as np
import pytest

from llamay import gguf
from llamay.errors import ModelFormatError
from llamay.gguf.format import ValueType
from llamay.gguf.quantize import (
    QuantizeOptions,
    UnsupportedQuantization,
    plan_file,
    quantize,
    write_imatrix,
)
from llamay.gguf.quantize import convert as convert_module
from llamay.gguf.writer import Typed
from llamay.models import synthetic


def vocabulary() -> dict:
    pieces = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    return synthetic.vocabulary(pieces, byte_fallback=True)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A small llama in F16: two layers of 256-wide rows, an untied output."""
    path = tmp_path_factory.mktemp("model") / "model-F16.gguf"
    return synthetic.write_model(
        path, "llama", vocabulary(), weight_type="F16", seed=11, n_embd=256, n_ff=512,
        n_layer=2, n_head=4, n_head_kv=2, head_dim=64, context_length=128,
        metadata={"general.file_type": Typed(1, ValueType.UINT32), "split.count": Typed(1, ValueType.UINT16)},
    )  # fmt: skip


def test_any_thread_count_and_slab_size_give_the_same_bytes(model, tmp_path, monkeypatch):
    options = QuantizeOptions("Q4_K_M")
    quantize(model, tmp_path / "one.gguf", options, threads=1)
    monkeypatch.setattr(convert_module, "SLAB_BYTES", 5000)  # slabs of a row or two
    monkeypatch.setattr(convert_module, "TASK_ELEMENTS", 700)
    quantize(model, tmp_path / "three.gguf", options, threads=3)
    assert (tmp_path / "one.gguf").read_bytes() == (tmp_path / "three.gguf").read_bytes()


def test_the_output_is_the_input_with_llama_quantizes_keys(model, tmp_path):
    out = quantize(model, tmp_path / "q.gguf", QuantizeOptions("Q8_0"))
    source, written = gguf.read(model), gguf.read(tmp_path / "q.gguf")
    keys = [k for k in source.metadata if k not in ("general.file_type", "split.count")]
    assert list(written.metadata) == [*keys, "general.quantization_version", "general.file_type"]
    assert written.metadata["general.file_type"] == 7
    assert written.value_type("general.file_type") == ValueType.UINT32
    for key in keys:
        assert written.value_type(key) == source.value_type(key), key
    assert list(written.tensors) == [step.info.name for step in out.steps]
    assert written.tensors["blk.0.attn_norm.weight"].type == "F32"
    assert np.array_equal(
        written.tensors["blk.0.attn_norm.weight"].data,
        source.tensors["blk.0.attn_norm.weight"].data,
    )
    assert {t.type for t in written.tensors.values() if len(t.shape) == 2} == {"Q8_0"}


def test_an_interrupted_quantization_leaves_nothing_behind(model, tmp_path):
    out = tmp_path / "out.gguf"
    out.write_bytes(b"an older file")

    def interrupt(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        quantize(model, out, QuantizeOptions("Q4_K_M"), threads=2, progress=interrupt)
    assert out.read_bytes() == b"an older file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gguf"]


def test_progress_counts_every_input_byte(model, tmp_path):
    seen = []
    plan = quantize(model, tmp_path / "q.gguf", QuantizeOptions("Q6_K"), progress=seen.append)
    assert (
        sum(seen) == plan.source_bytes == sum(t.nbytes for t in gguf.read(model).tensors.values())
    )


def test_a_truncated_input_is_a_one_line_error(model, tmp_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(model.read_bytes()[:-1000])
    with pytest.raises(
        ModelFormatError, match=r"cut.gguf: tensor .* runs past the end of the file"
    ):
        quantize(cut, tmp_path / "out.gguf", QuantizeOptions("Q4_0"))
    assert not (tmp_path / "out.gguf").exists()


def test_nan_and_overflow_are_refused_as_llama_quantize_refuses_them(tmp_path):
    weights = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    meta = {"general.architecture": "llama", "llama.block_count": Typed(1, ValueType.UINT32)}
    nan = weights.astype(np.float16)
    nan[3, 17] = np.nan
    bad = gguf.write(tmp_path / "nan.gguf", meta, {"blk.0.ffn_up.weight": nan})
    with pytest.raises(
        ModelFormatError,
        match=r"nan.gguf: tensor 'blk.0.ffn_up.weight' holds an infinite or NaN value \(in its block 785\)",
    ):
        quantize(bad, tmp_path / "out.gguf", QuantizeOptions("Q8_0"))
    huge = gguf.write(tmp_path / "huge.gguf", meta, {"blk.0.ffn_up.weight": weights * 1e7})
    with pytest.raises(
        UnsupportedQuantization, match=r"blk.0.ffn_up.weight as Q4_0: a scale overflows"
    ):
        quantize(huge, tmp_path / "out.gguf", QuantizeOptions("Q4_0"))
    assert not (tmp_path / "out.gguf").exists()


def test_requantizing_needs_to_be_asked_for(model, tmp_path):
    q8 = tmp_path / "q8.gguf"
    quantize(model, q8, QuantizeOptions("Q8_0"))
    with pytest.raises(
        UnsupportedQuantization, match=r"output.weight is already Q8_0: .* --allow-requantize"
    ):
        plan_file(q8, QuantizeOptions("Q4_0"))
    quantize(q8, tmp_path / "q4.gguf", QuantizeOptions("Q4_0", allow_requantize=True))
    # the same bytes as quantizing the dequantized values
    from llamay.gguf import quant

    source = gguf.read(q8).tensors["blk.1.ffn_down.weight"]
    expected = quant.quantize(source.dequantize(), "Q4_0")
    assert np.array_equal(
        gguf.read(tmp_path / "q4.gguf").tensors["blk.1.ffn_down.weight"].data, expected
    )
    # same type, nothing to convert: copied, no permission needed
    quantize(q8, tmp_path / "again.gguf", QuantizeOptions("Q8_0"))


def test_importance_matrices_that_do_not_fit_are_refused(model, tmp_path):
    with pytest.raises(
        UnsupportedQuantization, match=r"Q2_K_S needs an importance matrix .*--imatrix"
    ):
        plan_file(model, QuantizeOptions("Q2_K_S"))
    wrong = write_imatrix(
        tmp_path / "wrong.gguf", {"blk.0.attn_q.weight": np.ones(128)}, {"blk.0.attn_q.weight": [1]}
    )
    with pytest.raises(
        UnsupportedQuantization, match=r"holds 128 values for blk.0.attn_q.weight, which needs 256"
    ):
        plan_file(model, QuantizeOptions("Q4_K_M", imatrix=wrong))
    # the embeddings' entry may be of any size: llama.cpp lets it pass unused
    embeddings = write_imatrix(
        tmp_path / "e.gguf", {"token_embd.weight": np.ones(7)}, {"token_embd.weight": [1]}
    )
    plan = plan_file(model, QuantizeOptions("Q4_K_M", imatrix=embeddings))
    assert all(step.weights is None for step in plan.steps)
    partial = write_imatrix(
        tmp_path / "p.gguf", {"blk.0.ffn_up.weight": np.ones(256)}, {"blk.0.ffn_up.weight": [1]}
    )
    with pytest.raises(
        UnsupportedQuantization,
        match=r"has nothing for blk.0.attn_k.weight, which Q2_K_S makes Q2_K",
    ):
        plan_file(model, QuantizeOptions("Q2_K_S", imatrix=partial))


def test_types_named_for_the_output_and_embeddings_must_be_written_by_llamay(model):
    with pytest.raises(
        UnsupportedQuantization, match="--output-tensor-type IQ4_NL: llamay writes tensors as F32"
    ):
        plan_file(model, QuantizeOptions("Q4_K_M", output_tensor_type="IQ4_NL"))
    plan = plan_file(
        model, QuantizeOptions("Q4_K_M", output_tensor_type="q8_0", token_embedding_type="f16")
    )
    types = {step.info.name: step.info.type for step in plan.steps}
    assert (types["output.weight"], types["token_embd.weight"]) == ("Q8_0", "F16")


def test_imatrix_keys_are_recorded_as_llama_quantize_records_them(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = [f"blk.{il}.{role}.weight" for il in range(2) for role in ("attn_q", "ffn_up")]
    write_imatrix(tmp_path / "m.gguf", {n: np.ones(256) for n in names}, {n: [4] for n in names},
                  datasets=["wiki.train.raw"], chunk_count=33)  # fmt: skip
    quantize(model, tmp_path / "out.gguf", QuantizeOptions("Q4_K_M", imatrix="m.gguf"))
    meta = gguf.read(tmp_path / "out.gguf").metadata
    assert list(meta)[-4:] == [
        "quantize.imatrix.file",
        "quantize.imatrix.dataset",
        "quantize.imatrix.entries_count",
        "quantize.imatrix.chunks_count",
    ]
    assert [meta[k] for k in list(meta)[-4:]] == ["m.gguf", "wiki.train.raw", 4, 33]


def test_a_file_of_another_alignment_keeps_it(tmp_path):
    # llama-quantize copies general.alignment but aligns the data to 32, a file it cannot
    # read back itself; llamay aligns the data as the key says
    meta = {
        "general.architecture": "llama",
        "llama.block_count": Typed(1, ValueType.UINT32),
        "general.alignment": Typed(64, ValueType.UINT32),
    }
    rows = np.random.default_rng(3).standard_normal((40, 256)).astype(np.float16)
    source = gguf.write(
        tmp_path / "a64.gguf", meta, {"blk.0.ffn_up.weight": rows, "x.bias": np.ones(3, np.float32)}
    )
    quantize(source, tmp_path / "q.gguf", QuantizeOptions("Q8_0"))
    written = gguf.read(tmp_path / "q.gguf")
    assert written.alignment == 64
    assert all(t.offset % 64 == 0 for t in written.tensors.values())
    assert written.tensors["blk.0.ffn_up.weight"].type == "Q8_0"
