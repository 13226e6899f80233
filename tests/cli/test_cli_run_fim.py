"""`llamay run MODEL --fim-prefix TEXT --fim-suffix TEXT`: only the middle a fill-in-the-middle
model writes between them goes to stdout, the same text Model.infill gives; the file forms read
the code from files; a model without FIM tokens, or a PROMPT beside them, is the user's error."""

from __future__ import annotations

import pytest

import llamay

from helpers.clitools import assert_user_error, run_llamay
from helpers.fim_models import SYNTH_QWEN2, fim_model

PREFIX = "This program is free software"
SUFFIX = " to share and change it."

pytestmark = pytest.mark.slow  # each case starts the console script and loads a model


@pytest.fixture(scope="module")
def coder(tmp_path_factory):
    return fim_model(tmp_path_factory.mktemp("fim") / "coder.gguf")


def middle(path, prefix: str, suffix: str, n: int) -> str:
    with llamay.load(path, threads=2) as model:
        generation = model.infill(prefix, suffix, max_tokens=n, temperature=0)
        text = "".join(piece.text for piece in generation.pieces())
        generation.context.close()
    return text


def test_the_middle_alone_goes_to_stdout(coder):
    result = run_llamay(
        "run", str(coder), "--fim-prefix", PREFIX, "--fim-suffix", SUFFIX, "--temp", "0", "-n", "12"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == middle(coder, PREFIX, SUFFIX, 12) != ""
    assert "generated 12 tokens" in result.stderr


def test_the_code_may_come_from_files(coder, tmp_path):
    (tmp_path / "before.txt").write_text(PREFIX)
    (tmp_path / "after.txt").write_text(SUFFIX)
    result = run_llamay(
        "run",
        str(coder),
        "--fim-prefix-file",
        str(tmp_path / "before.txt"),
        "--fim-suffix-file",
        str(tmp_path / "after.txt"),
        "--temp",
        "0",
        "-n",
        "12",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == middle(coder, PREFIX, SUFFIX, 12)


def test_a_model_without_fim_tokens_is_named():
    result = run_llamay("run", str(SYNTH_QWEN2), "--fim-prefix", "a", "--fim-suffix", "b")
    assert_user_error(result, "Infill is not supported by this model", SYNTH_QWEN2.name)


@pytest.mark.parametrize(
    "extra",
    [
        ["a prompt"],
        ["--raw"],
        ["--system", "be brief"],
        ["--fim-suffix", "b", "--fim-suffix-file", __file__],
    ],
)
def test_usage_errors(coder, extra):
    result = run_llamay("run", str(coder), "--fim-prefix", "a", *extra)
    assert result.returncode == 2, result.stderr
    assert "Error:" in result.stderr and "Traceback" not in result.stderr
