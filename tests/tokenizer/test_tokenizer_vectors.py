"""llama.cpp's own tokenizer test vectors (tests/test-tokenizer-0), 46 texts per vocabulary.

The .inp files hold the texts separated by `__ggml_vocab_test__` lines, the .out files one line of
ids per text, made by llama.cpp without BOS and without parsing special tokens. detokenized.json
holds what llama.cpp's llama_detokenize makes of those ids. The first five vocabularies come with
the reference data; bert-bge, deepseek-coder, deepseek-llm, falcon and starcoder are llama.cpp's
own files (models/ in its source, MIT licence), for WordPiece and the pre-tokenizers they use.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from llamay import load_tokenizer
from llamay.tokenizer import Tokenizer

VOCAB = Path(__file__).parents[1] / "data" / "vocab"
FILES = sorted(p.name for p in VOCAB.glob("*.gguf"))
SEPARATOR = "\n__ggml_vocab_test__\n"


@functools.cache
def tokenizer(name: str) -> Tokenizer:
    return load_tokenizer(VOCAB / name)


def cases(name: str) -> list[tuple[str, list[int]]]:
    texts = (VOCAB / f"{name}.inp").read_text(encoding="utf-8").split(SEPARATOR)
    if texts[-1] == "":  # as llama.cpp reads them: a final separator ends the last text
        texts.pop()
    lines = (VOCAB / f"{name}.out").read_text(encoding="utf-8").splitlines()
    return [(text, [int(t) for t in line.split()]) for text, line in zip(texts, lines, strict=True)]


def test_the_vocabularies_are_there():
    assert [name.removeprefix("ggml-vocab-").removesuffix(".gguf") for name in FILES] == [
        *("bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "llama-bpe"),
        *("llama-spm", "phi-3", "qwen2", "starcoder"),
    ]
    assert all(len(cases(name)) == 46 for name in FILES)


@pytest.mark.parametrize("name", FILES)
def test_tokenize_matches_llama_cpp(name):
    tok = tokenizer(name)
    failures = [
        (text, expected, got)
        for text, expected in cases(name)
        if (got := tok.tokenize(text, add_bos=False, special=False)) != expected
    ]
    assert failures == []


@pytest.mark.parametrize("name", FILES)
def test_detokenize_matches_llama_cpp(name):
    tok = tokenizer(name)
    llama_cpp = json.loads((VOCAB / "detokenized.json").read_text(encoding="utf-8"))[name]
    got = [tok.detokenize(ids) for _, ids in cases(name)]
    assert got == llama_cpp


@pytest.mark.parametrize("name", FILES)
def test_round_trip_wherever_llama_cpp_round_trips(name):
    tok = tokenizer(name)
    llama_cpp = json.loads((VOCAB / "detokenized.json").read_text(encoding="utf-8"))[name]
    round_trips = [
        text for (text, _), back in zip(cases(name), llama_cpp, strict=True) if back == text
    ]
    # WordPiece lower-cases and drops spaces; BPE's space tidying changes a few texts
    assert len(round_trips) >= (4 if "bert" in name else 44)
    for text in round_trips:
        assert tok.detokenize(tok.tokenize(text, add_bos=False)) == text
        assert tok.detokenize(tok.tokenize(text, add_bos=True)) == text
