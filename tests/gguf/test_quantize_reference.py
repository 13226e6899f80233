"""`llamay quantize` against llama.cpp's llama-quantize: for every run recorded in
tests/data/quantize/reference.json (tools/gen_quantize_references.py), the same file, byte for
byte: the same tensor types, the same tensor bytes, the same metadata.

The models are written again from their recipes (their sha256 checks they are the files
llama-quantize was given); the importance matrices are llama-imatrix's, committed beside."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from llamay import gguf
from llamay.gguf.quantize import QuantizeOptions, quantize
from llamay.models import synthetic

DATA = Path(__file__).parent.parent / "data"
QUANTIZE = DATA / "quantize"
REFERENCE = json.loads((QUANTIZE / "reference.json").read_text())
VOCAB_FILE = DATA / "synth" / "llama2-spm-Q8_0.gguf"


def _id(result: dict) -> str:
    imatrix = result["imatrix"]
    return f"{result['model']}-{result['type']}" + (
        f"-{imatrix.rsplit('.', 1)[1]}" if imatrix else ""
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The reference's models, written once, each checked against the file llama.cpp had."""
    folder = tmp_path_factory.mktemp("quantize-models")
    vocab = {k: v for k, v in gguf.read(VOCAB_FILE).metadata.items() if k.startswith("tokenizer.")}
    paths = {}
    for name, model in REFERENCE["models"].items():
        recipe = dict(model["recipe"])
        path = synthetic.write_model(folder / f"{name}.gguf", recipe.pop("arch"), vocab, **recipe)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == model["sha256"], name
        paths[name] = path
    return paths


def tensors_of(path) -> dict[str, str]:
    """Each tensor's type and the first 16 hex digits of its bytes' sha256, as recorded."""
    return {
        name: f"{t.type} {hashlib.sha256(t.data.tobytes()).hexdigest()[:16]}"
        for name, t in gguf.read(path).tensors.items()
    }


@pytest.mark.parametrize("result", REFERENCE["results"], ids=_id)
def test_the_file_llama_quantize_writes(result, models, tmp_path, monkeypatch):
    # llama-quantize records the importance matrix's name as given: give the same one
    monkeypatch.chdir(QUANTIZE)
    out = tmp_path / "out.gguf"
    options = QuantizeOptions(result["type"], imatrix=result["imatrix"])
    quantize(models[result["model"]], out, options, threads=2)
    got = tensors_of(out)
    assert list(got) == list(result["tensors"])  # the order of llama.cpp's loader
    wrong = {
        name: (got[name], want) for name, want in result["tensors"].items() if got[name] != want
    }
    assert not wrong, f"{len(wrong)} tensors differ (got, llama-quantize's): {wrong}"
    assert hashlib.sha256(out.read_bytes()).hexdigest() == result["sha256"]  # metadata too


def test_the_reference_covers_every_type_llamay_writes():
    from llamay.gguf.quantize import FILE_TYPES

    covered = {result["type"] for result in REFERENCE["results"]}
    weighted = {result["type"] for result in REFERENCE["results"] if result["imatrix"]}
    assert covered == set(FILE_TYPES)
    assert {
        "Q2_K_S",
        "Q3_K_M",
        "Q4_0",
        "Q4_1",
        "Q4_K_M",
        "Q5_0",
        "Q5_1",
        "Q5_K_M",
        "Q6_K",
    } <= weighted
    forms = {
        result["imatrix"].rsplit(".", 1)[1] for result in REFERENCE["results"] if result["imatrix"]
    }
    assert forms == {"gguf", "dat"}
