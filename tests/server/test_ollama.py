"""The Ollama API's generation routes, driven by the official `ollama` client against a real
`llamay serve`. Gemma 3 270M is small: these tests check the protocol, token counts and
determinism, never the quality of the text."""

from __future__ import annotations

import json

import httpx
import numpy as np
import ollama
import pytest

from llamay import load_tokenizer

from helpers.waiting import wait_until

GREEDY = {"temperature": 0, "seed": 3, "num_predict": 8}
QUESTION = "Why is the sky blue?"
GEMMA_TURN = "<start_of_turn>user\n{{ .Prompt }}<end_of_turn>\n<start_of_turn>model\n"


@pytest.fixture(scope="module")
def client(server):
    return ollama.Client(host=server.base_url, headers=server.headers(), timeout=120)


@pytest.fixture(scope="module")
def tokenizer(gemma_path):
    return load_tokenizer(gemma_path)


def test_root_and_version(server):
    assert httpx.get(server.url("/")).text == "Ollama is running"
    head = httpx.head(server.url("/"))
    assert head.status_code == 200 and head.content == b""
    version = httpx.get(server.url("/api/version")).json()["version"]
    import llamay

    assert version == llamay.__version__


def test_generate_answers_with_counts_durations_and_context(client, server):
    answer = client.generate(model=server.model, prompt=QUESTION, options=GREEDY)
    assert answer.model == server.model
    assert answer.done is True and answer.done_reason == "length"
    assert answer.eval_count == 8
    assert answer.prompt_eval_count > len(QUESTION.split())
    assert len(answer.context) == answer.prompt_eval_count + answer.eval_count
    assert answer.total_duration >= answer.prompt_eval_duration + answer.eval_duration > 0
    assert answer.load_duration >= 0
    assert answer.response


def test_a_streamed_generate_says_the_same(client, server):
    whole = client.generate(model=server.model, prompt=QUESTION, options=GREEDY)
    parts = list(client.generate(model=server.model, prompt=QUESTION, options=GREEDY, stream=True))
    assert [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(part.response for part in parts) == whole.response
    last = parts[-1]
    assert (last.done_reason, last.eval_count, last.context) == ("length", 8, whole.context)


def test_generate_goes_on_from_an_earlier_context(client, server, tokenizer):
    first = client.generate(model=server.model, prompt="Name a fruit.", options=GREEDY)
    second = client.generate(
        model=server.model, prompt="Another one.", context=first.context, options=GREEDY
    )
    # The earlier turns' tokens, then the new turn (without a second BOS).
    assert second.context[: len(first.context)] == first.context
    turn = tokenizer.tokenize(
        "<start_of_turn>user\nAnother one.<end_of_turn>\n<start_of_turn>model\n", add_bos=False
    )
    assert second.prompt_eval_count == len(first.context) + len(turn)


def test_raw_prompts_and_templates(client, server, tokenizer):
    raw = client.generate(model=server.model, prompt="Once upon a time", raw=True, options=GREEDY)
    assert raw.prompt_eval_count == len(tokenizer.tokenize("Once upon a time"))
    # Gemma's own template, given as a Go template, makes the same prompt as the chat template.
    templated = client.generate(
        model=server.model, prompt=QUESTION, template=GEMMA_TURN, options=GREEDY
    )
    plain = client.generate(model=server.model, prompt=QUESTION, options=GREEDY)
    assert templated.context == plain.context
    with_system = client.generate(
        model=server.model,
        prompt=QUESTION,
        system="Answer in French.",
        template="{{ if .System }}{{ .System }}\n{{ end }}" + GEMMA_TURN,
        options=GREEDY,
    )
    system_ids = tokenizer.tokenize("Answer in French.\n", add_bos=False)
    assert with_system.prompt_eval_count == plain.prompt_eval_count + len(system_ids)


def test_an_unsupported_template_is_refused(client, server):
    with pytest.raises(ollama.ResponseError) as refused:
        client.generate(model=server.model, prompt="x", template="{{ range .Messages }}{{ end }}")
    assert refused.value.status_code == 400
    assert "range .Messages" in refused.value.error


def test_chat_stream_and_not(client, server):
    messages = [{"role": "user", "content": "Say hello."}]
    whole = client.chat(model=server.model, messages=messages, options=GREEDY)
    assert whole.message.role == "assistant"
    assert whole.done_reason == "length" and whole.eval_count == 8
    parts = list(client.chat(model=server.model, messages=messages, options=GREEDY, stream=True))
    assert all(part.message.role == "assistant" for part in parts)
    assert "".join(part.message.content for part in parts) == whole.message.content
    assert parts[-1].done and parts[-1].prompt_eval_count == whole.prompt_eval_count


def test_logprobs_of_each_token_and_its_alternatives(client, server):
    options = {**GREEDY, "num_predict": 6}
    whole = client.generate(
        model=server.model, prompt=QUESTION, options=options, logprobs=True, top_logprobs=3
    )
    assert len(whole.logprobs) == whole.eval_count == 6
    assert "".join(entry.token for entry in whole.logprobs) == whole.response
    for entry in whole.logprobs:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        alternatives = [alternative.logprob for alternative in entry.top_logprobs]
        assert alternatives == sorted(alternatives, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert (entry.top_logprobs[0].token, entry.top_logprobs[0].logprob) == (
            entry.token,
            entry.logprob,
        )
    parts = list(
        client.chat(
            model=server.model,
            messages=[{"role": "user", "content": QUESTION}],
            options=options,
            logprobs=True,
            stream=True,
        )
    )
    streamed = [entry for part in parts for entry in part.logprobs or []]
    assert len(streamed) == 6
    assert all(entry.top_logprobs == [] for entry in streamed)
    plain = client.generate(model=server.model, prompt=QUESTION, options=options)
    assert plain.logprobs is None


def test_stop_strings_and_seeds(client, server):
    options = {"temperature": 1.0, "seed": 42, "num_predict": 12}
    one = client.generate(model=server.model, prompt=QUESTION, options=options)
    two = client.generate(model=server.model, prompt=QUESTION, options=options)
    assert one.response == two.response
    stop = one.response[len(one.response) // 2 :][:3]
    stopped = client.generate(
        model=server.model, prompt=QUESTION, options={**options, "stop": [stop]}
    )
    assert stopped.done_reason == "stop"
    assert stopped.response == one.response[: one.response.index(stop)]


def test_format_constrains_the_answer_to_a_schema(client, server):
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    messages = [{"role": "user", "content": "Is water wet? Answer in JSON."}]
    answer = client.chat(
        model=server.model,
        messages=messages,
        format=schema,
        options={"temperature": 0, "num_predict": 40},
    )
    assert answer.done_reason == "stop"
    assert json.loads(answer.message.content)["answer"] in ("yes", "no")


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_tools_give_a_tool_call_or_text_streamed_or_not(client, server):
    messages = [{"role": "user", "content": "What is the weather in Paris? Call the tool."}]
    options = {"temperature": 0, "num_predict": 40}
    whole = client.chat(model=server.model, messages=messages, tools=[WEATHER], options=options)
    parts = list(
        client.chat(
            model=server.model, messages=messages, tools=[WEATHER], options=options, stream=True
        )
    )
    streamed_calls = [call for part in parts for call in part.message.tool_calls or []]
    if whole.message.tool_calls:
        (call,) = whole.message.tool_calls
        assert call.function.name == "get_weather"
        assert isinstance(call.function.arguments["city"], str)
        assert whole.message.content == ""
        assert streamed_calls == whole.message.tool_calls
    else:
        assert not whole.message.content.lstrip().startswith("{")
        assert "".join(part.message.content for part in parts) == whole.message.content
    # A conversation holding the call and its result goes on.
    history = [
        *messages,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "Sunny, 20 C", "tool_name": "get_weather"},
    ]
    after = client.chat(
        model=server.model, messages=history, tools=[WEATHER], options={"num_predict": 4}
    )
    assert after.done and after.prompt_eval_count > whole.prompt_eval_count


def test_load_and_unload_without_a_prompt(client, server):
    loaded = client.generate(model=server.model)
    assert (loaded.done, loaded.done_reason, loaded.response) == (True, "load", "")
    assert server.model in [m.model for m in client.ps().models]
    unloaded = client.chat(model=server.model, messages=[], keep_alive=0)
    assert unloaded.done_reason == "unload"
    assert server.model not in [m.model for m in client.ps().models]
    client.generate(model=server.model)  # loaded again for the other tests


def test_embed_gives_unit_vectors_and_embeddings_the_raw_one(client, server):
    one = client.embed(model=server.model, input="The sky is blue.")
    assert len(one.embeddings) == 1 and len(one.embeddings[0]) == 640
    assert np.linalg.norm(one.embeddings[0]) == pytest.approx(1.0, abs=1e-5)
    assert one.prompt_eval_count > 1
    many = client.embed(model=server.model, input=["The sky is blue.", "Grass is green."])
    assert many.embeddings[0] == one.embeddings[0]
    assert many.embeddings[1] != many.embeddings[0]
    short = client.embed(model=server.model, input="The sky is blue.", dimensions=8)
    assert len(short.embeddings[0]) == 8
    assert np.linalg.norm(short.embeddings[0]) == pytest.approx(1.0, abs=1e-5)
    raw = np.array(client.embeddings(model=server.model, prompt="The sky is blue.").embedding)
    assert np.linalg.norm(raw) != pytest.approx(1.0)
    assert raw / np.linalg.norm(raw) == pytest.approx(np.array(one.embeddings[0]), abs=1e-5)


@pytest.mark.parametrize(
    ("call", "status", "fragment"),
    [
        (lambda c, m: c.generate(model="no-such-model", prompt="x"), 404, "no-such-model"),
        (lambda c, m: c.chat(model="no-such-model", messages=[]), 404, "no-such-model"),
        (lambda c, m: c.embed(model="no-such-model", input="x"), 404, "no-such-model"),
        (lambda c, m: c.generate(model=m, prompt="word " * 1100), 400, "context holds 1024"),
        (lambda c, m: c.generate(model=m, prompt="x", options={"top_p": 2}), 400, "top_p"),
        (
            lambda c, m: c.generate(model=m, prompt="x", options={"temperature": "hot"}),
            400,
            "temperature",
        ),
        (lambda c, m: c.generate(model=m, prompt="x", think=True), 400, "thinking"),
        (lambda c, m: c.embed(model=m, input="x", dimensions=10_000), 400, "dimensions"),
    ],
)
def test_client_mistakes_are_4xx_with_ollamas_error_shape(client, server, call, status, fragment):
    with pytest.raises(ollama.ResponseError) as refused:
        call(client, server.model)
    assert refused.value.status_code == status
    assert fragment in refused.value.error


def test_errors_are_json_objects_with_one_error_string(server):
    json_type = {"Content-Type": "application/json"}
    for body in (b"{not json", b'{"model": "gemma3:270m", "prompt": "x", "format": "yaml"}'):
        answer = httpx.post(server.url("/api/generate"), content=body, headers=json_type)
        assert answer.status_code == 400
        assert list(answer.json()) == ["error"] and isinstance(answer.json()["error"], str)
    # Sent as a form (curl -d's default), the body is refused unread: what a web page can send
    # to any server without asking first (docs/security.md).
    form = httpx.post(
        server.url("/api/generate"),
        content=b'{"model": "gemma3:270m"}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415 and "application/json" in form.json()["error"]


def held_pages(server) -> int:
    """KV pages held by sequences (used, less those only the prefix cache keeps)."""
    stats = httpx.get(server.url("/llamay/v1/stats")).json()["models"][server.model]
    return stats["pages_used"] - stats["pages_cached"]


def test_a_client_that_leaves_a_stream_frees_its_pages(client, server):
    client.generate(model=server.model)  # loaded, so that the baseline is a loaded model's
    baseline = held_pages(server)
    body = {
        "model": server.model,
        "prompt": "Once upon a time " * 40,
        "raw": True,
        "options": {"num_predict": 900, "temperature": 1.0, "seed": 1},
    }
    with httpx.stream("POST", server.url("/api/generate"), json=body, timeout=60) as answer:
        lines = answer.iter_lines()
        for _ in range(5):
            assert json.loads(next(lines))["done"] is False
        assert held_pages(server) > baseline
    wait_until(lambda: held_pages(server) == baseline, 60, "the stream's pages were not freed")
