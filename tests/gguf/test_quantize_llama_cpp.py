"""`llamay quantize` live against llama.cpp's own quantizer (llama_model_quantize, through
llama-cpp-python: the bench extra), on bench/models.py's shapes made small and on models of
other seeds than tests/data/quantize's: the same files, byte for byte. Skipped without
llama-cpp-python; tests/gguf/test_quantize_reference.py holds the recorded case without it."""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from llamay import gguf
from llamay.gguf.quantize import FILE_TYPES, QuantizeOptions, quantize, read_imatrix, write_imatrix

pytestmark = [pytest.mark.bench, pytest.mark.slow]
llama_cpp = pytest.importorskip("llama_cpp")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import models  # noqa: E402


def llama_cpp_quantize(source: Path, out: Path, type_name: str, imatrix: dict | None = None):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FILE_TYPES[type_name].id
    params.nthread = 2
    keep = []
    if imatrix is not None:
        entries = (llama_cpp.llama_model_imatrix_data * (len(imatrix) + 1))()
        for entry, (name, values) in zip(entries, imatrix.items(), strict=False):
            data = np.ascontiguousarray(values, np.float32)
            keep.append(data)
            entry.name = name.encode()
            entry.data = data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            entry.size = data.size
        params.imatrix = entries
    status = llama_cpp.llama_model_quantize(
        str(source).encode(), str(out).encode(), ctypes.byref(params)
    )
    assert status == 0, f"llama.cpp could not quantize {source.name} to {type_name}"


def tensors_of(path: Path) -> dict[str, tuple[str, str]]:
    return {
        name: (t.type, hashlib.sha256(t.data.tobytes()).hexdigest())
        for name, t in gguf.read(path).tensors.items()
    }


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """Three of bench/models.py's shapes, narrowed to a few layers: their vocabularies (the
    bulk of each file), heads and experts are the real models'."""
    folder = tmp_path_factory.mktemp("shapes")
    paths = {}
    for name, narrowed in (
        ("llama-1b", {"n_embd": 256, "n_layer": 3, "n_ff": 1024}),
        ("qwen2.5-0.5b", {"n_embd": 160, "n_layer": 2, "n_ff": 320}),  # rows of 160: fallbacks
        ("qwen3-moe", {"n_embd": 256, "n_layer": 2, "n_ff_exp": 256}),
    ):
        shape = dataclasses.replace(models.SHAPES[name], **narrowed)
        paths[name] = folder / f"{name}.gguf"
        models.write_f16(shape, paths[name])
    return paths


CASES = [
    *(("llama-1b", name) for name in FILE_TYPES if name not in ("Q2_K_S", "MXFP4_MOE")),
    *(("qwen2.5-0.5b", name) for name in ("Q2_K", "Q3_K_S", "Q4_K_M", "Q5_K_M", "Q8_0")),
    *(("qwen3-moe", name) for name in ("MXFP4_MOE", "Q2_K", "Q4_K_M", "Q6_K")),
]
WEIGHTED = [
    *(("llama-1b", name) for name in ("Q2_K_S", "Q3_K_M", "Q4_0", "Q4_1", "Q4_K_M", "Q5_0",
                                     "Q5_1", "Q5_K_S", "Q6_K")),
    *(("qwen3-moe", name) for name in ("Q2_K_S", "Q4_K_M")),
]  # fmt: skip


@pytest.mark.parametrize(("shape", "type_name"), CASES)
def test_same_file_as_llama_cpp(shapes, shape, type_name, tmp_path):
    ours, theirs = tmp_path / "ours.gguf", tmp_path / "theirs.gguf"
    quantize(shapes[shape], ours, QuantizeOptions(type_name))
    llama_cpp_quantize(shapes[shape], theirs, type_name)
    assert tensors_of(ours) == tensors_of(theirs)
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize(("shape", "type_name"), WEIGHTED)
def test_same_tensors_as_llama_cpp_with_an_importance_matrix(shapes, shape, type_name, tmp_path):
    source = gguf.read(shapes[shape])
    rng = np.random.default_rng(4)
    sums, counts = {}, {}
    for name, t in source.tensors.items():
        if len(t.shape) >= 2 and name.startswith("blk."):
            n_expert = t.shape[2] if len(t.shape) > 2 else 1
            sums[name] = rng.gamma(0.5, 2.0, t.shape[0] * n_expert) * 100
            counts[name] = list(rng.integers(0, 60, n_expert))  # an expert may have seen nothing
    path = write_imatrix(
        tmp_path / "imatrix.gguf", sums, counts, datasets=["random"], chunk_count=3
    )
    ours, theirs = tmp_path / "ours.gguf", tmp_path / "theirs.gguf"
    quantize(shapes[shape], ours, QuantizeOptions(type_name, imatrix=path))
    llama_cpp_quantize(shapes[shape], theirs, type_name, read_imatrix(path).weights)
    assert tensors_of(ours) == tensors_of(theirs)
    # the metadata too, but for what the llama-quantize tool records of the matrix
    mine = {
        k: v for k, v in gguf.read(ours).metadata.items() if not k.startswith("quantize.imatrix")
    }
    assert list(mine) == list(gguf.read(theirs).metadata)
