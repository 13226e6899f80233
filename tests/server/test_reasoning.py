"""Reasoning separated from the answer: Qwen 3 / DeepSeek-R1 `<think>` tags and gpt-oss's
Harmony channels, in each family's shape (OpenAI reasoning_content, Anthropic thinking blocks,
Ollama thinking), streamed and not; tool calls made after reasoning still parse.

The served model is Gemma 3 270M's weights with Qwen 3's chat template (a GGUF copy with
another `tokenizer.chat_template`). Gemma does not think on its own, so the answer is opened
inside `<think>` by an assistant prefill, as DeepSeek-R1's template opens it: what the model
then writes is reasoning, on the real generation path.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx
import ollama
import openai
import pytest

from llamay.chat.answer import HARMONY, THINK, Answer
from llamay.chat.toolcalls import HARMONY as HARMONY_CALLS
from llamay.chat.toolcalls import HERMES
from llamay.gguf import read, writer

QWEN3 = Path(__file__).parents[1] / "data" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
THINKING = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "<think>\nOkay, the user asks"},
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def thinker(launch, tmp_path_factory, gemma_path):
    """A server whose model `qwen3-template.gguf` thinks in <think> tags (its template)."""
    models = tmp_path_factory.mktemp("thinking-models")
    source = read(str(gemma_path))
    metadata = {**source.metadata, "tokenizer.chat_template": QWEN3.read_text()}
    writer.write(models / "qwen3-template.gguf", metadata, source.tensors)
    running = launch(tmp_path_factory.mktemp("thinking-home"), "--models-dir", str(models))
    running.model = str(models / "qwen3-template.gguf")
    return running


# --- the reader, on the pieces of real token sequences --------------------------------------


class _Piece:
    def __init__(self, text, token=None):
        self.text, self.token = text, token


def _pieces(tokenizer, text):
    """`text` as a generation shows it: one piece per token, through the streaming decoder."""
    decoder = tokenizer.stream()
    ids = tokenizer.tokenize(text, add_bos=False)
    return [_Piece(decoder.feed(t), t) for t in ids] + [_Piece(decoder.flush())]


@pytest.fixture(scope="module")
def tokenizer(gemma_path):
    import llamay

    return llamay.load_tokenizer(str(gemma_path))


def _read(answer, pieces):
    events = [event for piece in pieces for event in answer.feed(piece)]
    return events + answer.finish()


def test_think_tags_split_reasoning_from_the_answer(tokenizer):
    answer = Answer(tokenizer, reasoning_kind=THINK)
    events = _read(answer, _pieces(tokenizer, "<think>\nLet me add.\n</think>\n\nIt is 4."))
    assert answer.reasoning == "\nLet me add.\n" and answer.text == "It is 4."
    assert events[0].kind == "reasoning" and events[-1].kind == "text"


def test_an_answer_that_starts_inside_thinking(tokenizer):
    answer = Answer(tokenizer, reasoning_kind=THINK, inside_thinking=True)
    _read(answer, _pieces(tokenizer, "adding two and two</think>\n\n4"))
    assert (answer.reasoning, answer.text) == ("adding two and two", "4")


def test_a_tool_call_after_reasoning_parses(tokenizer):
    answer = Answer(tokenizer, [WEATHER], HERMES, THINK)
    text = (
        "<think>\nI need the weather.\n</think>\n\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    _read(answer, _pieces(tokenizer, text))
    assert answer.reasoning == "\nI need the weather.\n"
    assert [(c.name, c.arguments) for c in answer.calls] == [("get_weather", {"city": "Oslo"})]
    assert answer.text == ""


def test_harmony_channels(tokenizer):
    pieces = [
        _Piece(t)
        for t in (
            "<|channel|>", "analysis", "<|message|>", "Think", " more.", "<|end|>",
            "<|start|>", "assistant", "<|channel|>", "final", "<|message|>", "Four.", "<|return|>",
        )
    ]  # fmt: skip
    answer = Answer(tokenizer, reasoning_kind=HARMONY)
    _read(answer, pieces)
    assert (answer.reasoning, answer.text) == ("Think more.", "Four.")


def test_harmony_tool_call_after_analysis(tokenizer):
    pieces = [
        _Piece(t)
        for t in (
            "<|channel|>", "analysis", "<|message|>", "Need weather.", "<|end|>",
            "<|start|>", "assistant", "<|channel|>", "commentary to=functions.get_weather",
            " <|constrain|>", "json", "<|message|>", '{"city": ', '"Oslo"}', "<|call|>",
        )
    ]  # fmt: skip
    answer = Answer(tokenizer, [WEATHER], HARMONY_CALLS, HARMONY)
    _read(answer, pieces)
    assert answer.reasoning == "Need weather."
    assert [(c.name, c.arguments) for c in answer.calls] == [("get_weather", {"city": "Oslo"})]


# --- the families, through the server ----------------------------------------------------------


def test_openai_reasoning_content(thinker):
    client = openai.OpenAI(base_url=thinker.url("/v1"), api_key="unused", max_retries=0)
    request = {"model": thinker.model, "messages": THINKING, "temperature": 0, "max_tokens": 12}
    message = client.chat.completions.create(**request).choices[0].message
    reasoning = message.model_extra["reasoning_content"]
    assert reasoning and "</think>" not in (message.content or "")
    chunks = list(client.chat.completions.create(**request, stream=True))
    streamed = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert streamed == reasoning


def test_openai_reasoning_effort_none_turns_qwen3_thinking_off(thinker):
    body = {
        "model": thinker.model,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 1,
        "reasoning_effort": "none",
        "chat_template_kwargs": {"enable_thinking": False},
    }
    answer = httpx.post(thinker.url("/v1/chat/completions"), json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    # the template's enable_thinking=false writes an empty think block into the prompt
    count = httpx.post(
        thinker.url("/v1/messages/count_tokens"),
        json={
            "model": thinker.model,
            "messages": [{"role": "user", "content": "Hi"}],
            "thinking": {"type": "disabled"},
        },
        timeout=60,
    ).json()["input_tokens"]
    plain = httpx.post(
        thinker.url("/v1/messages/count_tokens"),
        json={"model": thinker.model, "messages": [{"role": "user", "content": "Hi"}]},
        timeout=60,
    ).json()["input_tokens"]
    assert count > plain


def test_anthropic_thinking_blocks(thinker):
    client = anthropic.Anthropic(base_url=thinker.base_url, api_key="unused", max_retries=0)
    request = {
        "model": thinker.model,
        "max_tokens": 12,
        "messages": THINKING,
        "extra_body": {"temperature": 0},
    }
    message = client.messages.create(**request)
    assert message.content[0].type == "thinking" and message.content[0].thinking
    with client.messages.stream(**request) as stream:
        streamed = stream.get_final_message()
    assert streamed.content[0].type == "thinking"
    assert streamed.content[0].thinking == message.content[0].thinking


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_thinking(thinker, stream):
    client = ollama.Client(host=thinker.base_url)
    answer = client.chat(
        model=thinker.model,
        messages=THINKING,
        think=True,
        options={"temperature": 0, "num_predict": 12},
        stream=stream,
    )
    parts = list(answer) if stream else [answer]
    thinking = "".join(part.message.thinking or "" for part in parts)
    assert thinking and "<think>" not in "".join(part.message.content for part in parts)


def test_ollama_shows_the_thinking_capability_only_where_the_template_reasons(server):
    from llamay.chat.answer import reasoning_of

    assert reasoning_of(QWEN3.read_text()) == THINK  # what /api/show's "thinking" follows
    plain = httpx.post(server.url("/api/show"), json={"model": "gemma3:270m"}, timeout=60)
    assert "completion" in plain.json()["capabilities"]
    assert "thinking" not in plain.json()["capabilities"]


def test_ollama_think_on_a_model_that_does_not_think(server):
    answer = httpx.post(
        server.url("/api/chat"),
        json={
            "model": "gemma3:270m",
            "messages": [{"role": "user", "content": "Hi"}],
            "think": True,
            "stream": False,
        },
        timeout=60,
    )
    assert answer.status_code == 400 and "thinking" in json.dumps(answer.json())
