"""Fill-in-the-middle prompts (llamay/tokenizer/fim.py): the markers found by metadata key or by
text, the single-file and repository-level layouts token for token, what is cut to fit, and
the errors of a model that cannot fill in."""

from __future__ import annotations

import pytest

from llamay import ContextOverflow, InfillUnsupported
from llamay.tokenizer import Tokenizer, read_tokenizer
from llamay.tokenizer.fim import DROP_BLOCK, FimTokens, fim_prompt, supports_infill
from llamay.tokenizer.vocab import load_vocab

from helpers.fim_models import QWEN_FIM, UNNAMED_FIM, spm_vocabulary


def tokenizer_of(texts=(), keys=False) -> Tokenizer:
    return Tokenizer(load_vocab(spm_vocabulary(texts, keys), "test.gguf"))


def text(tokenizer: Tokenizer, value: str) -> list[int]:
    return tokenizer.tokenize(value, add_bos=False, special=False)


@pytest.fixture(scope="module")
def qwen() -> Tokenizer:
    return tokenizer_of(QWEN_FIM)


def test_qwen_markers_are_found_by_their_text(qwen):
    n = qwen.n_vocab - len(QWEN_FIM)
    assert FimTokens.of(qwen) == FimTokens(n, n + 1, n + 2, n + 3, n + 4, n + 5)
    assert FimTokens.of(qwen).repo_level
    # they end a middle: the model writes one of them when it is done
    assert {n + 3, n + 4, n + 5} <= qwen.eog_ids


def test_metadata_keys_name_markers_no_loader_knows():
    assert not supports_infill(tokenizer_of(UNNAMED_FIM, keys=False))
    named = tokenizer_of(UNNAMED_FIM, keys=True)
    n = named.n_vocab - 3
    assert FimTokens.of(named) == FimTokens(n, n + 1, n + 2, None, None, None)
    assert not FimTokens.of(named).repo_level


@pytest.mark.parametrize(
    ("name", "markers", "bos"),
    [
        ("starcoder", ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"), None),
        ("deepseek-coder", ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"), 32013),
    ],
)
def test_real_vocabularies_single_file_layout(data_dir, name, markers, bos):
    tokenizer = read_tokenizer(data_dir / "vocab" / f"ggml-vocab-{name}.gguf")
    pre, suf, mid = (tokenizer.vocab.token_id(marker) for marker in markers)
    prefix, suffix = "def area(r):\n    return ", "\n\nprint(area(2))\n"
    ids = fim_prompt(tokenizer, prefix, suffix, middle="3.14", n_ctx=4096)
    head = [bos] if bos is not None else []
    assert ids == [
        *head,
        pre,
        *text(tokenizer, prefix),
        *text(tokenizer, "3.14"),
        suf,
        *text(tokenizer, suffix),
        mid,
    ]


def test_repository_level_layout(qwen):
    fim = FimTokens.of(qwen)
    ids = fim_prompt(qwen, "x = ", "\n", extra=[("a.py", "def f(): return 1\n")], n_ctx=4096)
    assert ids == [
        fim.rep,
        *text(qwen, "myproject\n"),
        fim.sep,
        *text(qwen, "a.py\n"),
        *text(qwen, "def f(): return 1\n"),
        fim.sep,
        *text(qwen, "filename\n"),
        fim.pre,
        *text(qwen, "x = "),
        fim.suf,
        *text(qwen, "\n"),
        fim.mid,
    ]
    # no other files: the header and the current file's name all the same; None: single-file
    assert fim_prompt(qwen, "x = ", "\n", extra=[], n_ctx=4096)[: ids.index(fim.sep)] == [
        fim.rep,
        *text(qwen, "myproject\n"),
    ]
    assert fim_prompt(qwen, "x = ", "\n", n_ctx=4096)[0] == fim.pre


def test_other_files_without_repository_tokens_are_plain_text():
    tokenizer = tokenizer_of(UNNAMED_FIM, keys=True)
    fim = FimTokens.of(tokenizer)
    ids = fim_prompt(tokenizer, "x", "y", extra=[("a.py", "z")], n_ctx=4096)
    assert ids[: ids.index(fim.pre)] == text(tokenizer, "\n\n--- a.py ---\n\nz")


def test_marker_text_in_the_code_stays_text(qwen):
    fim = FimTokens.of(qwen)
    ids = fim_prompt(qwen, "a <|fim_middle|> b", "<|fim_suffix|>", n_ctx=4096)
    assert ids.count(fim.mid) == 1 and ids.count(fim.suf) == 1
    assert ids[-1] == fim.mid


def test_what_does_not_fit_is_cut_in_blocks_and_stays_put_under_an_edit(qwen):
    fim = FimTokens.of(qwen)
    prefix = "".join(f"v{i} = {i}\n" for i in range(300))
    suffix = "".join(f"w{i} = {i}\n" for i in range(300))
    n_ctx, reserve = 1024, 64
    ids = fim_prompt(qwen, prefix, suffix, n_ctx=n_ctx, reserve=reserve)
    assert len(ids) <= n_ctx - reserve
    pre, suf = text(qwen, prefix), text(qwen, suffix)
    kept_pre = ids[1 : ids.index(fim.suf)]
    kept_suf = ids[ids.index(fim.suf) + 1 : -1]
    dropped = len(pre) - len(kept_pre)
    assert dropped > 0 and dropped % DROP_BLOCK == 0 and kept_pre == pre[dropped:]
    assert kept_suf == suf[: len(kept_suf)] and len(kept_suf) >= (n_ctx - reserve - 3) // 4
    # an edit near the cursor: the kept prefix starts where it did, so its pages stay cached
    edited = fim_prompt(
        qwen, prefix.replace("v299 = 299", "v299 = 2990"), suffix, n_ctx=n_ctx, reserve=reserve
    )
    assert edited != ids
    assert edited[: len(kept_pre) - 8] == ids[: len(kept_pre) - 8]


def test_other_files_get_only_what_is_left(qwen):
    fim = FimTokens.of(qwen)
    big = "".join(f"u{i} = {i}\n" for i in range(400))
    ids = fim_prompt(qwen, "x = ", "\n", extra=[("big.py", big)], n_ctx=512, reserve=32)
    assert len(ids) <= 512 - 32
    # the files' end is kept (nearest the current file), the header cut away with the start
    assert fim.rep not in ids
    assert ids[ids.index(fim.pre) - len(text(qwen, "filename\n")) - 1] == fim.sep


def test_a_model_without_markers_is_refused_by_name():
    with pytest.raises(InfillUnsupported) as refused:
        fim_prompt(tokenizer_of(), "a", "b", n_ctx=64, name="plain.gguf")
    message = str(refused.value)
    assert message.startswith("Infill is not supported by this model: plain.gguf")
    assert "no fill-in-the-middle prefix, suffix and middle tokens" in message
    assert "tokenizer.ggml.fim_pre_token_id" in message


def test_a_prompt_that_leaves_no_room_is_an_overflow(qwen):
    with pytest.raises(ContextOverflow):
        fim_prompt(qwen, "", "", middle="abc " * 100, n_ctx=64, reserve=8)
