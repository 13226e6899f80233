"""Importance matrices (llamay.gguf.quantize.imatrix): both of llama.cpp's file forms read to
the values llama-quantize's loader gives the quantizers, and damaged files refused in a line."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from llamay import gguf
from llamay.errors import ModelFormatError, ModelNotFound
from llamay.gguf.format import ValueType
from llamay.gguf.quantize import read_imatrix, write_imatrix
from llamay.gguf.writer import Typed


def test_gguf_form_is_sums_over_counts_per_expert(tmp_path):
    rng = np.random.default_rng(1)
    sums = {
        "blk.0.attn_q.weight": rng.uniform(0, 50, 64).astype(np.float32),
        "blk.0.ffn_up_exps.weight": rng.uniform(0, 50, 3 * 32).astype(np.float32),
    }
    counts = {"blk.0.attn_q.weight": [7.0], "blk.0.ffn_up_exps.weight": [2.5, 0.0, 4.0]}
    path = write_imatrix(
        tmp_path / "m.gguf", sums, counts, datasets=["a.txt", "b.txt"], chunk_count=9
    )
    matrix = read_imatrix(path)
    assert matrix.datasets == ["a.txt", "b.txt"] and matrix.chunk_count == 9
    assert np.array_equal(
        matrix.weights["blk.0.attn_q.weight"], sums["blk.0.attn_q.weight"] / np.float32(7)
    )
    experts = matrix.weights["blk.0.ffn_up_exps.weight"].reshape(3, 32)
    by_expert = sums["blk.0.ffn_up_exps.weight"].reshape(3, 32)
    assert np.array_equal(experts[0], by_expert[0] / np.float32(3))  # 2.5 tokens round to 3
    assert np.array_equal(experts[1], np.ones(32, np.float32))  # an expert that saw nothing
    assert np.array_equal(experts[2], by_expert[2] / np.float32(4))
    assert all(v.dtype == np.float32 for v in matrix.weights.values())


def test_legacy_form_divides_by_the_calls(tmp_path):
    values = np.array([3.0, 6.0, 9.0, 1.0], np.float32)
    path = write_imatrix(
        tmp_path / "m.dat",
        {"a.weight": values, "b.weight": values},
        {"a.weight": [3], "b.weight": [0]},
        datasets=["wiki.txt"],
        chunk_count=12,
        legacy=True,
    )
    matrix = read_imatrix(path)
    assert np.array_equal(matrix.weights["a.weight"], values / np.float32(3))
    assert np.array_equal(matrix.weights["b.weight"], values)  # no calls: as stored
    assert (matrix.datasets, matrix.chunk_count) == (["wiki.txt"], 12)
    # the chunk count and dataset name are optional
    bare = tmp_path / "bare.dat"
    raw = path.read_bytes()
    bare.write_bytes(raw[: len(raw) - len(struct.pack("<ii", 12, 8)) - len(b"wiki.txt")])
    assert (read_imatrix(bare).datasets, read_imatrix(bare).chunk_count) == ([], 0)


def test_damaged_files_are_one_line_errors(tmp_path):
    path = write_imatrix(
        tmp_path / "m.dat", {"a.weight": np.ones(8, np.float32)}, {"a.weight": [1]}, legacy=True
    )
    cut = tmp_path / "cut.dat"
    cut.write_bytes(path.read_bytes()[:30])
    with pytest.raises(
        ModelFormatError, match=r"cut\.dat: truncated imatrix file: a\.weight's values"
    ):
        read_imatrix(cut)
    empty = tmp_path / "empty.dat"
    empty.write_bytes(struct.pack("<i", 0))
    with pytest.raises(ModelFormatError, match=r"empty.dat: not an imatrix file"):
        read_imatrix(empty)
    with pytest.raises(ModelNotFound, match="no such file"):
        read_imatrix(tmp_path / "missing.dat")
    nan = write_imatrix(
        tmp_path / "nan.dat",
        {"a.weight": np.array([1, np.nan], np.float32)},
        {"a.weight": [1]},
        legacy=True,
    )
    with pytest.raises(
        ModelFormatError, match=r"the importance of a.weight has a value that is not finite"
    ):
        read_imatrix(nan)


def test_gguf_files_that_are_not_imatrices_are_refused(tmp_path):
    model = gguf.write(
        tmp_path / "model.gguf",
        {"general.architecture": "llama"},
        {"x.weight": np.ones((2, 32), np.float32)},
    )
    with pytest.raises(ModelFormatError, match=r"not an imatrix file: it lacks imatrix.datasets"):
        read_imatrix(model)
    meta = {
        "imatrix.datasets": Typed([], ValueType.STRING),
        "imatrix.chunk_count": Typed(1, ValueType.UINT32),
        "imatrix.chunk_size": Typed(512, ValueType.UINT32),
    }
    lone = gguf.write(
        tmp_path / "lone.gguf", meta, {"a.weight.in_sum2": np.ones((1, 32), np.float32)}
    )
    with pytest.raises(ModelFormatError, match=r"a.weight has sums without counts"):
        read_imatrix(lone)
    halves = {
        "a.weight.in_sum2": np.ones((1, 32), np.float16),
        "a.weight.counts": np.ones((1, 1), np.float32),
    }
    with pytest.raises(ModelFormatError, match=r"a\.weight\.in_sum2 is F16; it must be F32"):
        read_imatrix(gguf.write(tmp_path / "f16.gguf", meta, halves))
