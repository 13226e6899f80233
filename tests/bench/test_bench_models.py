"""bench/models.py writes files of its shapes that llamay loads and runs: a dense one and a
mixture of experts, here at a few of their real dimensions (quantizing needs llama.cpp, and
the benchmarks do that)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import llamay

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import models


@pytest.mark.parametrize("name", ["llama-1b", "qwen2.5-0.5b", "qwen3-moe"])
def test_a_shape_written_small_loads_and_runs(tmp_path, name):
    # the vocabulary, the family, the heads' layout and the expert counts are the shape's own
    real = models.SHAPES[name]
    shape = dataclasses.replace(
        real, n_embd=128, n_layer=2, n_ff=256, n_ff_exp=64 if real.n_expert else 0
    )
    path = tmp_path / "m.gguf"
    models.write_f16(shape, path)
    model = llamay.load(path, n_ctx=64, threads=1)
    assert model.arch == shape.arch
    assert model.hparams.n_layer == 2
    assert model.hparams.n_expert == shape.n_expert
    assert ("output.weight" in model.file.tensors) == (not shape.tied)
    assert ("blk.0.attn_q.bias" in model.file.tensors) == (name == "qwen2.5-0.5b")
    assert ("blk.0.attn_q_norm.weight" in model.file.tensors) == (name == "qwen3-moe")
    ctx = model.context()
    ctx.feed(model.tokenize("The shape of a model", add_bos=False))
    assert np.all(np.isfinite(ctx.logits()))
    model.close()


def test_a_cached_quantized_file_is_used_without_its_f16_source(tmp_path, monkeypatch):
    # the F16 source of a large shape (8 GB for this one) is often deleted once quantized: it is
    # not written again
    def write_f16(shape, path):
        raise AssertionError(f"wrote {path.name}")

    monkeypatch.setattr(models, "write_f16", write_f16)
    cached = tmp_path / "qwen3-4b-Q4_K_M.gguf"
    cached.write_bytes(b"cached")
    assert models.model_path("qwen3-4b:Q4_K_M", tmp_path) == cached
    assert sorted(p.name for p in tmp_path.iterdir()) == [cached.name]
