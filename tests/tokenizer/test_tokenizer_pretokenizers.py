"""The pre-tokenizer table: every `tokenizer.ggml.pre` name llama.cpp knows, split as llama.cpp splits.

Two kinds of evidence: splits worked out by hand from llama.cpp's regexes and its quirks, and
token ids that llama.cpp itself produced for the GPT-2 vocabulary with its pre-tokenizer name
swapped for each kind's (tests/data/vocab/pretokenizer-ids.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamay import gguf, load_tokenizer
from llamay.errors import TokenizerError
from llamay.tokenizer import Tokenizer
from llamay.tokenizer.pretokenizers import KINDS, PRE_NAMES, PreTokenizer, pre_settings
from llamay.tokenizer.vocab import load_vocab

VOCAB = Path(__file__).parents[1] / "data" / "vocab"
LLAMA_CPP_IDS = json.loads((VOCAB / "pretokenizer-ids.json").read_text(encoding="utf-8"))

SPLITS = [
    # GPT-2: contractions, optional space before a run, whitespace before the next word
    ("gpt2", "Hello world's 123  x", ["Hello", " world", "'s", " 123", " ", " x"]),
    ("gpt2", "a\t b", ["a", "\t", " b"]),
    # Llama 3: digits in threes, newlines with the whitespace before them, case-blind contractions
    ("llama3", "1234567", ["123", "456", "7"]),
    ("llama3", "\n\n  x", ["\n\n", " ", " x"]),
    ("llama3", "I'M FINE", ["I", "'M", " FINE"]),
    ("qwen2", "x123", ["x", "1", "2", "3"]),
    ("starcoder", "x123", ["x", "1", "2", "3"]),
    # GPT-4o: upper-case run then lower-case run; every non-ASCII letter counts as both
    ("gpt4o", "ΑΒΓαβγ HTTPServer abcDEF", ["ΑΒΓαβγ", " HTTPServer", " abc", "DEF"]),
    ("tekken", "abcDEF", ["abc", "DEF"]),
    # \p{Lu} and \p{Ll} both mean "any letter" in llama.cpp
    ("youtu", "HelloWorld", ["HelloWorld"]),
    # digit groups from the right; AFMoE's splitter glues the text before a run to it first
    ("tiny_aya", "ab12345", ["ab", "12", "345"]),
    ("afmoe", "ab12345", ["ab", "12", "345"]),
    ("superbpe", "1234567", ["1", "234", "567"]),
    ("kimi_k2", "中文abc's", ["中文", "abc's"]),
    ("bloom", "Hello, world.", ["Hello", ",", " world", "."]),
    # several patterns, each cutting what the previous ones left
    ("default", "a+=1000", ["a", "+=", "100", "0"]),
    ("falcon", "a`b 1234", ["a", "`", "b", " ", "123", "4"]),
    ("chameleon", "<sentinel:3>x", ["<", "sentinel", ":", "3", ">", "x"]),
    ("deepseek_llm", "Hi 世界123", ["Hi", " ", "世界", "123"]),
    ("jais2", "a     b", ["a", "    ", " b"]),
    ("qwen35", "e\u0301te", ["e\u0301te"]),
    ("exaone_moe", "New York 5", ["New York", " ", "5"]),
    ("gemma4", "a\u2581b\n\nc", ["a\u2581b", "\n\n", "c"]),
]


@pytest.mark.parametrize(("kind", "text", "words"), SPLITS)
def test_split_by_hand(kind, text, words):
    assert PreTokenizer(kind).split(text) == words


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_compiles_and_covers_its_text(kind):
    text = LLAMA_CPP_IDS["texts"][3] + " " + LLAMA_CPP_IDS["texts"][5]
    assert "".join(PreTokenizer(kind).split(text)) == text


def test_every_name_maps_to_a_kind():
    assert len(PRE_NAMES) == 92
    assert {settings.kind for settings in PRE_NAMES.values()} == set(KINDS)
    assert pre_settings("llama-bpe").ignore_merges and pre_settings("llama-bpe").add_bos
    assert not pre_settings("qwen2").clean_spaces and pre_settings("gpt-2").clean_spaces
    assert pre_settings("chatglm-bpe").no_bos_token
    assert pre_settings(None) is PRE_NAMES["default"]  # llama.cpp's fallback for a missing key


def test_unknown_name_is_an_error_that_names_it():
    with pytest.raises(TokenizerError, match="'no-such-pre'"):
        pre_settings("no-such-pre")


@pytest.fixture(scope="module")
def gpt2_metadata() -> dict:
    return dict(gguf.read(VOCAB / "ggml-vocab-gpt-2.gguf").metadata)


def test_llama_cpp_ids_cover_every_kind():
    assert set(LLAMA_CPP_IDS["kinds"]) == set(KINDS) - {"whitespace"}


@pytest.mark.parametrize("kind", sorted(LLAMA_CPP_IDS["kinds"]))
def test_tokenize_matches_llama_cpp_for_each_kind(gpt2_metadata, kind):
    case = LLAMA_CPP_IDS["kinds"][kind]
    metadata = {**gpt2_metadata, "tokenizer.ggml.pre": case["pre"]}
    tok = Tokenizer(load_vocab(metadata, "gpt-2 vocabulary"))
    got = [tok.tokenize(text, add_bos=False, special=False) for text in LLAMA_CPP_IDS["texts"]]
    assert got == case["ids"]


def test_unknown_pre_in_a_file_is_refused(gpt2_metadata, tmp_path):
    path = tmp_path / "vocab.gguf"
    gguf.write(path, {**gpt2_metadata, "tokenizer.ggml.pre": "mystery-bpe"})
    with pytest.raises(TokenizerError, match="unknown pre-tokenizer 'mystery-bpe'"):
        load_tokenizer(path)
