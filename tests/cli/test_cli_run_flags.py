"""`llamay run`'s sampling and output flags on the real Gemma 3 270M: each one does what the
Python API does with the same arguments (stop strings, penalties, typical sampling, logprobs),
and constrained output through a GBNF grammar or a JSON schema."""

from __future__ import annotations

import json

import pytest

import llamay
from llamay.engine.generate import chat_prompt_ids

from helpers.clitools import assert_user_error, run_llamay

PROMPT = "Write a short poem about the sea."
N = 24


@pytest.fixture(scope="module")
def gemma(gemma_path):
    model = llamay.load(gemma_path)
    yield model
    model.close()


def api_pieces(model, **kwargs) -> list:
    """The pieces the Python API makes for PROMPT through the chat template, greedily."""
    rendered = model.chat_template.render([{"role": "user", "content": PROMPT}])
    generation = model.generate(
        chat_prompt_ids(model, rendered), temperature=0, max_tokens=N, **kwargs
    )
    pieces = list(generation.pieces())
    generation.context.close()
    return pieces


def cli(gemma_path, *flags: str):
    result = run_llamay("run", str(gemma_path), PROMPT, "--temp", "0", "-n", str(N), *flags)
    assert result.returncode == 0, result.stderr
    return result


def test_stop_strings_end_the_answer_unprinted(gemma, gemma_path):
    plain = "".join(piece.text for piece in api_pieces(gemma))
    words = plain.split()
    stop = words[len(words) // 2]
    result = cli(gemma_path, "--stop", "NEVER-APPEARS", "--stop", stop)
    assert result.stdout == plain[: plain.index(stop)]
    assert "finish: stop" in result.stderr


def test_penalties_and_typical_p_sample_as_the_api_does(gemma, gemma_path):
    flags = {
        "repeat_penalty": 1.3,
        "repeat_last_n": 16,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
    }
    args = [
        arg for name, value in flags.items() for arg in (f"--{name.replace('_', '-')}", str(value))
    ]
    result = cli(gemma_path, *args)
    expected = "".join(piece.text for piece in api_pieces(gemma, **flags))
    assert result.stdout == expected
    assert expected != "".join(piece.text for piece in api_pieces(gemma))  # they made a change
    sampled = run_llamay(
        "run", str(gemma_path), PROMPT, "-n", str(N), "--seed", "3", "--typical-p", "0.5"
    )
    rendered = gemma.chat_template.render([{"role": "user", "content": PROMPT}])
    generation = gemma.generate(
        chat_prompt_ids(gemma, rendered), max_tokens=N, seed=3, typical_p=0.5
    )
    assert sampled.stdout == "".join(piece.text for piece in generation.pieces())
    generation.context.close()


def test_logprobs_are_json_lines_on_stderr_one_per_token(gemma, gemma_path):
    result = cli(gemma_path, "--logprobs")
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    pieces = [piece for piece in api_pieces(gemma, logprobs=0) if piece.token is not None]
    assert [line["token"] for line in lines] == [piece.token for piece in pieces]
    assert [line["logprob"] for line in lines] == [round(piece.logprob, 6) for piece in pieces]
    assert all(line["text"] == gemma.detokenize([line["token"]]) for line in lines)
    assert all(line["logprob"] <= 0 for line in lines)


def test_a_gbnf_grammar_constrains_the_answer(gemma_path, tmp_path):
    grammar = tmp_path / "answer.gbnf"
    grammar.write_text('root ::= ("yes" | "no") "." \n')
    result = run_llamay("run", str(gemma_path), "Is the sea wet?", "--grammar-file", str(grammar))
    assert result.returncode == 0, result.stderr
    assert result.stdout in ("yes.", "no.")
    assert "finish: stop" in result.stderr


def test_a_json_schema_constrains_the_answer_to_matching_json(gemma_path, tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
                "required": ["colour"],
                "additionalProperties": False,
            }
        )
    )
    result = run_llamay(
        "run",
        str(gemma_path),
        "What colour is the sea?",
        "--temp",
        "0",
        "--json-schema",
        str(schema),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) in ({"colour": "red"}, {"colour": "blue"})


def test_a_bad_grammar_or_schema_is_one_error_line(gemma_path, tmp_path):
    grammar = tmp_path / "bad.gbnf"
    grammar.write_text("root ::= missing\n")
    assert_user_error(
        run_llamay("run", str(gemma_path), "hi", "--grammar-file", str(grammar)),
        f"{grammar}: ",
        "'missing'",
    )
    schema = tmp_path / "bad.json"
    schema.write_text("{not json")
    assert_user_error(
        run_llamay("run", str(gemma_path), "hi", "--json-schema", str(schema)),
        str(schema),
        "not JSON",
    )
    both = run_llamay(
        "run", str(gemma_path), "hi", "--json-schema", str(schema), "--grammar-file", str(grammar)
    )
    assert both.returncode == 2 and "pick one" in both.stderr
