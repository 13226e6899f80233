"""`llamay tokenize MODEL TEXT [--no-bos] [--no-special] [--json] [-f FILE]`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llamay.cli.main import cli

SPM = str(Path(__file__).parents[1] / "data" / "vocab" / "ggml-vocab-llama-spm.gguf")


def run(*args: str):
    return CliRunner().invoke(cli, ["tokenize", *args])


def test_json_is_a_list_of_ids():
    result = run(SPM, "Hello world", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output) == [1, 15043, 3186]


def test_flags():
    assert json.loads(run(SPM, "Hello", "--json", "--no-bos").output) == [15043]
    assert json.loads(run(SPM, "</s>", "--json", "--no-bos").output) == [2]
    assert json.loads(run(SPM, "</s>", "--json", "--no-bos", "--no-special").output) == [
        *(1533, 29879, 29958)
    ]


def test_plain_output_is_id_tab_piece():
    result = run(SPM, "Hi 🦙")
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "1\t'<s>'",
        "6324\t' Hi'",
        "29871\t' '",
        "243\tb'\\xf0'",
        "162\tb'\\x9f'",
        "169\tb'\\xa6'",
        "156\tb'\\x99'",
    ]


def test_text_from_a_file(tmp_path):
    path = tmp_path / "prompt.txt"
    path.write_text("Hello world", encoding="utf-8")
    assert json.loads(run(SPM, "-f", str(path), "--json").output) == [1, 15043, 3186]


def test_errors():
    assert run(SPM).exit_code == 2  # neither TEXT nor -f
    missing = run("no-such-model.gguf", "x")
    assert missing.exit_code == 1
    assert "error: no-such-model.gguf" in missing.output


def test_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "binary.txt"
    path.write_bytes(b"ok \xff")
    result = run(SPM, "-f", str(path))
    assert result.exit_code == 1
    assert f"error: {path}: not UTF-8 text (invalid byte at offset 3)" in result.output
