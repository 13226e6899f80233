"""`llamay run` on a model that thinks: reasoning shown before the answer (dimmed on a
terminal), or left out with --hide-thinking.

The model is Gemma 3 270M's weights under Qwen 3's chat template; a grammar makes its answer a
`<think>` block and then text, so the path is the real one and the output certain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llamay.gguf import read, writer

from helpers.clitools import run_llamay

QWEN3 = Path(__file__).parents[1] / "data" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
GRAMMAR = 'root ::= "<think>\\nI add two and two.\\n</think>\\n\\n" "Four" "."'


@pytest.fixture(scope="module")
def thinker(tmp_path_factory, gemma_path):
    folder = tmp_path_factory.mktemp("thinker")
    source = read(str(gemma_path))
    metadata = {**source.metadata, "tokenizer.chat_template": QWEN3.read_text()}
    path = writer.write(folder / "qwen3-template.gguf", metadata, source.tensors)
    grammar = folder / "think.gbnf"
    grammar.write_text(GRAMMAR)
    return path, grammar


def test_reasoning_is_shown_then_the_answer(thinker):
    model, grammar = thinker
    done = run_llamay(
        "run", str(model), "2+2?", "-n", "40", "--temp", "0", "--grammar-file", str(grammar)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "\nI add two and two.\nFour."  # piped: no colour, no tags


def test_hide_thinking_drops_it(thinker):
    model, grammar = thinker
    done = run_llamay(
        "run", str(model), "2+2?", "-n", "40", "--temp", "0", "--grammar-file", str(grammar),
        "--hide-thinking",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Four."
