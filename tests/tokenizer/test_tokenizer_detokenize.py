"""Pieces, detokenizing and streaming: llama.cpp's token_to_piece, and only whole characters out."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from llamay import load_tokenizer
from llamay.tokenizer import Tokenizer

VOCAB = Path(__file__).parents[1] / "data" / "vocab"


@functools.cache
def tokenizer(name: str) -> Tokenizer:
    return load_tokenizer(VOCAB / f"ggml-vocab-{name}.gguf")


def test_pieces_as_llama_cpp_renders_them():
    spm = tokenizer("llama-spm")
    assert spm.token_to_piece(15043) == b" Hello"  # "\u2581Hello"
    assert spm.token_to_piece(13) == b"\n"  # <0x0A>
    assert spm.token_to_piece(243) == b"\xf0"  # <0xF0>: part of a character
    assert spm.token_to_piece(1) == b""  # <s> is a control token...
    assert spm.token_to_piece(1, special=True) == b"<s>"  # ...shown only when asked
    assert spm.token_to_piece(0, special=True) == b"<unk>"
    bpe = tokenizer("gpt-2")
    assert bpe.token_to_piece(18435) == b" Hello"  # "\u0120Hello" in GPT-2's byte alphabet
    assert bpe.token_to_piece(198) == b"\n"  # "\u010a"
    assert bpe.token_to_piece(50256) == b""
    assert bpe.token_to_piece(50256, special=True) == b"<|endoftext|>"


def test_spm_leading_space_is_removed_with_and_without_bos():
    tok = tokenizer("llama-spm")
    assert tok.tokenize("Hello") == [1, 15043]
    assert tok.detokenize([1, 15043]) == "Hello"
    assert tok.detokenize([15043]) == "Hello"
    assert tok.detokenize([1, 15043], special=True) == "<s>Hello"
    assert tok.detokenize([15043, 15043]) == "Hello Hello"  # only the first space goes


def test_bpe_tidies_spaces_like_llama_cpp():
    # clean_up_tokenization_spaces: GPT-2 and Llama 3 do it, Qwen 2 does not
    text = "Hello , world ! It 's a ' quote ' and they 're here ."
    assert tokenizer("gpt-2").detokenize(tokenizer("gpt-2").tokenize(text)) == (
        "Hello, world! It's a'quote'and they're here."
    )
    qwen = tokenizer("qwen2")
    assert qwen.detokenize(qwen.tokenize(text)) == text


@pytest.mark.parametrize("name", ["llama-spm", "gpt-2", "qwen2"])
def test_stream_holds_back_split_characters(name):
    tok = tokenizer(name)
    text = "a 🦙 b é ✅"
    ids = tok.tokenize(text, add_bos=False)
    stream = tok.stream()
    chunks = [stream.feed(t) for t in ids]
    assert all("\ufffd" not in chunk for chunk in chunks)
    # the stream strips nothing: SentencePiece's space prefix comes out too
    expected = " " + text if tok.vocab.add_space_prefix else text
    assert "".join(chunks) + stream.flush() == expected


def test_stream_emits_a_character_once_its_last_byte_arrives():
    tok = tokenizer("llama-spm")
    llama = tok.tokenize("🦙", add_bos=False)
    assert llama == [29871, 243, 162, 169, 156]  # "\u2581" then four byte tokens
    stream = tok.stream()
    assert [stream.feed(t) for t in llama] == [" ", "", "", "", "🦙"]
    assert stream.flush() == ""


def test_stream_flush_marks_an_unfinished_character():
    stream = tokenizer("llama-spm").stream()
    assert stream.feed(243) == ""  # <0xF0>, the first of four bytes
    assert stream.flush() == "\ufffd"


def test_stream_shows_special_tokens_only_when_asked():
    tok = tokenizer("llama-spm")
    assert tok.stream().feed(2) == ""
    assert tok.stream(special=True).feed(2) == "</s>"


def test_detokenize_replaces_bytes_that_make_no_character():
    assert tokenizer("llama-spm").detokenize([243, 15043]) == "\ufffd Hello"
