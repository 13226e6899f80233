"""Tokenizers of whole models: the seven synth models and the real Gemma 3 270M (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamay import load_tokenizer

DATA = Path(__file__).parents[1] / "data"
SYNTH = json.loads((DATA / "synth" / "reference.json").read_text(encoding="utf-8"))["files"]
GEMMA = json.loads((DATA / "gemma3-270m-q4_k_m.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", SYNTH, ids=[case["file"] for case in SYNTH])
def test_synth_models_tokenize_as_llama_cpp(case):
    tok = load_tokenizer(DATA / "synth" / case["file"])
    ids = tok.tokenize("The license")
    assert ids == case["tokens_the_license"]
    assert tok.detokenize(ids) == "The license"


@pytest.fixture(scope="module")
def gemma(gemma_path):
    return load_tokenizer(gemma_path)


@pytest.mark.parametrize("case", GEMMA["tokenize"], ids=lambda case: case["text"][:20])
def test_gemma_tokenizes_as_llama_cpp(gemma, case):
    ids = gemma.tokenize(case["text"], add_bos=case["add_bos"], special=case["parse_special"])
    assert ids == case["ids"]
    assert gemma.detokenize(ids) == case["text"]


def test_gemma_prompts_and_vocabulary(gemma):
    for case in GEMMA["greedy"]:
        assert gemma.tokenize(case["prompt"]) == case["prompt_ids"]
    assert gemma.n_vocab == 262144
    assert (gemma.bos_id, gemma.eos_id, gemma.eot_id) == (2, 1, 106)
    assert gemma.eog_ids == {1, 106, 212}  # <eos>, <end_of_turn>, </s> (llama.cpp's set)
    # "\n" runs and space runs are user-defined tokens: cut out even without special parsing
    assert gemma.tokenize("<start_of_turn>user\n\n\nHi  there<end_of_turn>\n") == [
        *(2, 105, 2364, 109, 10979, 138, 13534, 106, 107)
    ]
    assert gemma.tokenize("<end_of_turn>\n", add_bos=False, special=False) == [
        *(236820, 643, 236779, 1340, 236779, 887, 236813, 107)
    ]


def test_gemma_round_trips_the_gpl(gemma):
    text = (DATA / "texts" / "gpl-3.txt").read_text(encoding="utf-8")
    ids = gemma.tokenize(text)
    assert len(ids) == 7563
    assert gemma.detokenize(ids) == text


def test_gemma_by_store_name(gemma):
    assert load_tokenizer("gemma3:270m").tokenize("Hello world") == [2, 9259, 1902]
