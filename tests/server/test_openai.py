"""The OpenAI API, driven by the official `openai` SDK against a real `llamay serve`.

Gemma 3 270M is small: these tests check the protocol, token counts, determinism and what
grammars enforce, never the quality of the text.
"""

from __future__ import annotations

import base64
import json
from typing import Literal

import httpx
import jsonschema
import numpy as np
import openai
import pydantic
import pytest

from llamay import load_tokenizer

HELLO = [{"role": "user", "content": "Say hello in three words."}]
COUNT = [{"role": "user", "content": "Count from 1 to 50, separated by commas."}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}
PARAMETERS = {
    tool["function"]["name"]: tool["function"]["parameters"] for tool in (WEATHER_TOOL, TIME_TOOL)
}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)


def greedy(client, messages=HELLO, **options):
    options = {"temperature": 0, "max_tokens": 12} | options
    return client.chat.completions.create(model="gemma3:270m", messages=messages, **options)


def test_chat_completion_shape_and_usage(client):
    completion = greedy(client)
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "gemma3:270m"
    [choice] = completion.choices
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.message.tool_calls is None
    assert choice.finish_reason in ("stop", "length")
    usage = completion.usage
    assert usage.prompt_tokens > 5
    assert 1 <= usage.completion_tokens <= 12
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_greedy_and_seeded_sampling_repeat(client):
    assert greedy(client).choices[0].message.content == greedy(client).choices[0].message.content
    seeded = [
        client.chat.completions.create(
            model="gemma3:270m", messages=HELLO, temperature=1.0, seed=1234, max_tokens=12
        )
        .choices[0]
        .message.content
        for _ in range(2)
    ]
    assert seeded[0] == seeded[1]


def test_max_completion_tokens_wins_over_max_tokens(client):
    completion = greedy(client, COUNT, max_tokens=30, max_completion_tokens=4)
    assert completion.usage.completion_tokens == 4
    assert completion.choices[0].finish_reason == "length"


def test_stop_strings_cut_the_text(client):
    full = greedy(client, COUNT, max_tokens=20).choices[0].message.content
    stop = full.split()[2]
    cut = greedy(client, COUNT, max_tokens=20, stop=["never appears", stop])
    assert cut.choices[0].message.content == full[: full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_n_choices(client):
    completion = client.chat.completions.create(
        model="gemma3:270m", messages=HELLO, n=3, seed=5, temperature=1.0, max_tokens=8
    )
    assert [c.index for c in completion.choices] == [0, 1, 2]
    generated = completion.usage.completion_tokens
    assert 3 <= generated <= 24
    stream = client.chat.completions.create(
        model="gemma3:270m", messages=HELLO, n=3, seed=5, temperature=1.0, max_tokens=8, stream=True
    )
    texts = ["", "", ""]
    finished = []
    for chunk in stream:
        [choice] = chunk.choices
        texts[choice.index] += choice.delta.content or ""
        if choice.finish_reason:
            finished.append(choice.index)
    assert texts == [c.message.content for c in completion.choices]
    assert sorted(finished) == [0, 1, 2]


def test_content_as_parts_and_unknown_fields(client):
    parts = [{"role": "user", "content": [{"type": "text", "text": "Say hello in three words."}]}]
    as_parts = greedy(client, parts, extra_body={"not_a_field": {"x": 1}}, user="someone")
    assert as_parts.choices[0].message.content == greedy(client).choices[0].message.content


def test_logprobs_and_top_logprobs(client):
    completion = greedy(client, logprobs=True, top_logprobs=3, max_tokens=5)
    entries = completion.choices[0].logprobs.content
    assert len(entries) == completion.usage.completion_tokens
    for entry in entries:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        assert entry.bytes == list(entry.token.encode())
        # greedy: the chosen token is the most likely one
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)
    assert "".join(e.token for e in entries) == completion.choices[0].message.content


def test_logit_bias_bans_a_token(client, gemma_path):
    first = greedy(client, logprobs=True, max_tokens=3).choices[0].logprobs.content[0].token
    [first_id] = load_tokenizer(gemma_path).tokenize(first, add_bos=False, special=False)
    banned = greedy(client, logprobs=True, max_tokens=3, logit_bias={str(first_id): -100})
    assert banned.choices[0].logprobs.content[0].token != first


def test_penalties_are_accepted(client):
    plain = greedy(client, COUNT, max_tokens=24).choices[0].message.content
    penalized = (
        greedy(client, COUNT, max_tokens=24, presence_penalty=1.5, frequency_penalty=1.5)
        .choices[0]
        .message.content
    )
    assert penalized != plain


def test_json_object_output_parses(client):
    completion = greedy(
        client,
        [{"role": "user", "content": "Describe a cat as JSON."}],
        response_format={"type": "json_object"},
        max_tokens=60,
    )
    if completion.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(completion.choices[0].message.content), dict)
    else:  # cut by max_tokens: still a prefix of an object
        assert completion.choices[0].message.content.lstrip().startswith("{")


def test_json_schema_output_validates(client):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer"},
            "pet": {"type": "string", "enum": ["cat", "dog"]},
        },
        "required": ["name", "age", "pet"],
        "additionalProperties": False,
    }
    completion = greedy(
        client,
        [{"role": "user", "content": "Invent a person with a pet."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": schema},
        },
        max_tokens=80,
    )
    assert completion.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(completion.choices[0].message.content), schema)


def test_unsupported_schema_is_400(client):
    with pytest.raises(openai.BadRequestError):
        greedy(
            client,
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {"type": "object", "$ref": "http://example.com/x"},
                },
            },
        )


@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "get_time"}}],
)
def test_forced_tool_calls_follow_the_schema(client, tool_choice):
    completion = greedy(
        client,
        [{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL, TIME_TOOL],
        tool_choice=tool_choice,
        parallel_tool_calls=False,
        max_tokens=80,
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    if isinstance(tool_choice, dict):
        assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])


def test_tool_choice_none_answers_in_text(client):
    completion = greedy(client, tools=[WEATHER_TOOL], tool_choice="none")
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].message.content


def test_auto_tool_choice_comes_back_as_a_call(client):
    # Gemma writes the Hermes `<tool_call>` its template teaches; the lazy grammar holds the
    # arguments to the schema from the marker on, and the answer comes back as a call.
    completion = greedy(
        client,
        [{"role": "user", "content": "What is the weather in Paris, in celsius?"}],
        tools=[WEATHER_TOOL],
        parallel_tool_calls=False,
        max_tokens=120,
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), PARAMETERS["get_weather"])


def test_a_tool_result_conversation_is_rendered(client):
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris", "unit": "celsius"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"},
    ]
    completion = greedy(client, messages, tools=[WEATHER_TOOL], tool_choice="none")
    assert completion.choices[0].message.content


def test_streamed_tool_call_deltas(client):
    stream = client.chat.completions.create(
        model="gemma3:270m",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[WEATHER_TOOL],
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=80,
        stream=True,
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas and all(d.index == 0 for d in deltas)
    assert deltas[0].id.startswith("call_") and deltas[0].function.name == "get_weather"
    arguments = "".join(d.function.arguments or "" for d in deltas)
    jsonschema.validate(json.loads(arguments), PARAMETERS["get_weather"])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_stream_matches_the_whole_answer(client):
    whole = greedy(client, COUNT, max_tokens=16)
    stream = client.chat.completions.create(
        model="gemma3:270m",
        messages=COUNT,
        temperature=0,
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content == ""
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_raw_stream_ends_with_done(server):
    body = {"model": "gemma3:270m", "messages": HELLO, "max_tokens": 3, "stream": True}
    with httpx.stream(
        "POST", server.url("/v1/chat/completions"), json=body, timeout=120
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        events = [line for line in response.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in events)


def test_prompt_longer_than_the_context(client):
    long = [{"role": "user", "content": "word " * 1500}]
    with pytest.raises(openai.BadRequestError) as raised:
        greedy(client, long)
    assert "context" in raised.value.message
    truncated = greedy(client, long, extra_body={"truncate": True}, max_tokens=4)
    assert truncated.usage.prompt_tokens <= 1024 - 4


def test_unknown_model_raises_not_found(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope:1b", messages=HELLO)


def test_bad_option_is_400_naming_it(client):
    with pytest.raises(openai.BadRequestError) as raised:
        greedy(client, temperature=-1)
    assert raised.value.body["param"] == "temperature"


def test_text_completion(client):
    completion = client.completions.create(
        model="gemma3:270m", prompt="The capital of France is", max_tokens=6, temperature=0
    )
    assert completion.object == "text_completion"
    [choice] = completion.choices
    assert choice.text and choice.finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens <= 6
    echoed = client.completions.create(
        model="gemma3:270m",
        prompt="The capital of France is",
        max_tokens=6,
        temperature=0,
        echo=True,
    )
    assert echoed.choices[0].text == "The capital of France is" + choice.text
    streamed = client.completions.create(
        model="gemma3:270m",
        prompt="The capital of France is",
        max_tokens=6,
        temperature=0,
        stream=True,
    )
    assert "".join(c.choices[0].text for c in streamed) == choice.text


def test_text_completion_of_several_prompts_with_logprobs(client):
    completion = client.completions.create(
        model="gemma3:270m",
        prompt=["One, two,", "Red, green,"],
        max_tokens=3,
        temperature=0,
        logprobs=2,
    )
    assert [c.index for c in completion.choices] == [0, 1]
    for choice in completion.choices:
        logprobs = choice.logprobs
        assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs)
        assert all(len(top) <= 2 for top in logprobs.top_logprobs)


def test_embeddings_float_and_base64(client, server):
    texts = ["a cat sat on the mat", "stock markets fell today"]
    by_sdk = client.embeddings.create(model="gemma3:270m", input=texts)  # asks for base64
    assert [d.index for d in by_sdk.data] == [0, 1]
    vectors = np.array([d.embedding for d in by_sdk.data])
    assert vectors.shape == (2, 640)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert by_sdk.usage.prompt_tokens == by_sdk.usage.total_tokens > 0
    raw = httpx.post(
        server.url("/v1/embeddings"),
        json={"model": "gemma3:270m", "input": texts[0], "encoding_format": "float"},
        timeout=120,
    ).json()
    assert raw["object"] == "list" and raw["data"][0]["object"] == "embedding"
    assert np.allclose(raw["data"][0]["embedding"], vectors[0], atol=1e-6)
    b64 = httpx.post(
        server.url("/v1/embeddings"),
        json={"model": "gemma3:270m", "input": texts[0], "encoding_format": "base64"},
        timeout=120,
    ).json()
    decoded = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    assert np.array_equal(decoded, np.float32(raw["data"][0]["embedding"]))


def test_models_list_and_retrieve(client):
    ids = [m.id for m in client.models.list()]
    assert "gemma3:270m" in ids
    model = client.models.retrieve("gemma3:270m")
    assert model.id == "gemma3:270m" and model.owned_by == "llamay"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope:1b")


def test_the_sdk_sends_the_key(keyed_server):
    keyed = openai.OpenAI(
        base_url=keyed_server.url("/v1"), api_key=keyed_server.api_key, max_retries=0
    )
    assert "gemma3:270m" in [m.id for m in keyed.models.list()]
    wrong = openai.OpenAI(base_url=keyed_server.url("/v1"), api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()


class Pet(pydantic.BaseModel):
    name: str
    species: Literal["cat", "dog", "fish"]
    legs: int


def test_sdk_parse_with_a_pydantic_model(client):
    completion = client.chat.completions.parse(
        model="gemma3:270m",
        messages=[{"role": "user", "content": "Invent a pet."}],
        response_format=Pet,
        temperature=0,
        max_tokens=80,
    )
    assert isinstance(completion.choices[0].message.parsed, Pet)


def test_sdk_pydantic_function_tool(client):
    completion = client.chat.completions.parse(
        model="gemma3:270m",
        messages=[{"role": "user", "content": "Register a cat called Tom."}],
        tools=[openai.pydantic_function_tool(Pet)],
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=80,
    )
    [call] = completion.choices[0].message.tool_calls
    assert call.function.name == "Pet"
    assert isinstance(call.function.parsed_arguments, Pet)
