"""Tool calls under tool_choice "auto", in each template's own convention, on the real
generation path and through a real `llamay serve` with the official SDKs, litellm and
langchain-ollama.

Gemma 3 270M does write the Hermes `<tool_call>` its built-in template teaches when asked
plainly; for the other templates the answer is driven to the opening marker by an assistant
prefill (the marker as the answer's start), and from there the lazy grammar and the parser do
the work on the real model: arguments held to the schema, the closing marker, the call read
back.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx
import jsonschema
import ollama
import openai
import pytest

import llamay
from llamay import chat
from llamay.chat import Answer
from llamay.chat.toolcalls import FORMATS, call_grammar, format_of, parse_calls
from llamay.gguf import read, writer
from llamay.tokenizer.chat import ChatTemplate
from llamay.tokenizer.chat_builtin import BUILTIN_TEMPLATES

from helpers import families

TEMPLATES = sorted((Path(__file__).parents[1] / "data" / "chat_templates").glob("*.jinja"))
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 20}},
            "required": ["zone"],
        },
    },
}
SCHEMA = WEATHER["function"]["parameters"]
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}]
EXPECTED_FORMAT = {
    "Qwen-Qwen2.5-7B-Instruct": "hermes",
    "Qwen-Qwen3-0.6B": "hermes",
    "google-gemma-3-270m-it": "json",
    "meta-llama-Llama-2-7b-chat-hf": "json",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct": "llama3",
    "meta-llama-Meta-Llama-3-8B-Instruct": "json",
    "microsoft-Phi-3.5-mini-instruct": "json",
    "mistralai-Mistral-7B-Instruct-v0.3": "mistral",
}
# What each format's answer opens with, as a prefill that drives the model to a call (a bare
# JSON call opens once it names a tool: the model writes the name).
OPENING = {
    "hermes": "<tool_call>\n",
    "llama3": '{"name": "',
    "mistral": "[TOOL_CALLS]",
    "json": '{"name": "',
}
HISTORY = [
    {"role": "user", "content": "Weather in Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny in Rome."},
    {"role": "user", "content": "And in Paris?"},
]


# --- the table, each format read from text ---------------------------------------------------


def test_every_test_template_has_its_format():
    assert {t.stem for t in TEMPLATES} == set(EXPECTED_FORMAT)
    for template in TEMPLATES:
        assert format_of(template.read_text()).name == EXPECTED_FORMAT[template.stem]


@pytest.mark.parametrize(
    ("fmt", "text", "head", "calls"),
    [
        (
            "hermes",
            'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n'
            "</tool_call>",
            "Let me check.\n",
            [("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})],
        ),
        (
            "llama3",
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
            "",
            [("get_weather", {"city": "Oslo"})],
        ),
        (
            "llama3",
            '{"name": "get_weather", "parameters": {"city": "Oslo"}}; '
            '{"name": "get_time", "parameters": {"zone": "CET"}}',
            "",
            [("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})],
        ),
        (
            "mistral",
            '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "a1"}]',
            "",
            [("get_weather", {"city": "Oslo"})],
        ),
        (
            "harmony",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Oslo"}<|call|>',
            "<|channel|>commentary",
            [("get_weather", {"city": "Oslo"})],
        ),
        (
            "json",
            '{"name": "get_time", "arguments": {"zone": "CET"}}',
            "",
            [("get_time", {"zone": "CET"})],
        ),
        ("json", "The weather is {unknown}.", "The weather is {unknown}.", []),
        ("hermes", "<tool_call>\n{broken", "<tool_call>\n{broken", []),
        ("hermes", '<tool_call>{"name": "nope", "arguments": {}}</tool_call>', None, []),
    ],
)
def test_calls_are_read_in_each_format(fmt, text, head, calls):
    text_before, found = parse_calls(text, FORMATS[fmt], [WEATHER, TIME])
    assert [(c.name, c.arguments) for c in found] == calls
    assert text_before == (text if head is None else head)


# --- every template, on the real generation path --------------------------------------------


@pytest.fixture(scope="module")
def model(gemma_path):
    loaded = llamay.load(str(gemma_path))
    yield loaded
    loaded.close()


def _use_template(model, path: Path) -> None:
    original = model.file and ChatTemplate.from_gguf_metadata(model.file.metadata)
    model.__dict__["chat_template"] = ChatTemplate(
        path.read_text(), bos_token=original.bos_token, eos_token=original.eos_token
    )


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_history_is_written_back_in_the_templates_convention(model, template):
    _use_template(model, template)
    fmt = format_of(model.chat_template.source)
    prompt = model.tokenizer.detokenize(
        chat.chat_prompt(model, HISTORY, tools=[WEATHER]), special=True
    )
    written = {
        "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}',
        "llama3": '{"name": "get_weather", "parameters": {"city": "Rome"}}',
        "mistral": '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome"}',
        "json": '{"name": "get_weather", "arguments": {"city": "Rome"}}',
    }[fmt.name]
    assert written in prompt
    assert "The current weather in a city." in prompt  # the definitions are there too


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_a_call_after_the_opening_marker_is_held_to_the_schema(model, template):
    _use_template(model, template)
    fmt = format_of(model.chat_template.source)
    messages = [*ASK, {"role": "assistant", "content": OPENING[fmt.name]}]
    prefill = chat.prefill_of(messages)
    ids = chat.chat_prompt(model, messages, tools=[WEATHER, TIME])
    grammar = chat.tool_grammar(model, [WEATHER, TIME], "auto", parallel=False, prefill=prefill)
    generation = model.generate(ids, max_tokens=60, temperature=0, grammar=grammar)
    answer = chat.answer_reader(model, ids, [WEATHER, TIME], prefill)
    events = [event for piece in generation.pieces() for event in answer.feed(piece)]
    events += answer.finish()
    assert generation.finish_reason == "stop"  # the grammar ended it after one call
    [call] = answer.calls
    assert [e.kind for e in events] == ["call"] and answer.text == ""
    schema = SCHEMA if call.name == "get_weather" else TIME["function"]["parameters"]
    jsonschema.validate(call.arguments, schema)


def test_free_text_stays_text_under_auto(model):
    _use_template(model, TEMPLATES[0])  # Qwen 2.5: Hermes
    messages = [{"role": "user", "content": "Say hello."}]
    ids = chat.chat_prompt(model, messages, tools=[WEATHER])
    grammar = chat.tool_grammar(model, [WEATHER], "auto")
    generation = model.generate(ids, max_tokens=8, temperature=0, grammar=grammar)
    answer = Answer(model.tokenizer, [WEATHER], format_of(model.chat_template.source))
    for piece in generation.pieces():
        answer.feed(piece)
    answer.finish()
    assert answer.calls == [] and answer.text == generation.text


# --- through the server -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)


def test_openai_auto_call_streamed_as_deltas(oai):
    stream = oai.chat.completions.create(
        model="gemma3:270m",
        messages=ASK,
        tools=[WEATHER],
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=120,
        stream=True,
    )
    chunks = list(stream)
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].function.name == "get_weather" and deltas[0].id.startswith("call_")
    arguments = "".join(d.function.arguments or "" for d in deltas)
    jsonschema.validate(json.loads(arguments), SCHEMA)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "<tool_call>\n{" not in text
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


# The other shapes the Hermes family reads, each opened by a prefill up to the tool's name
# (Gemma 3 270M writes the rest): fenced JSON is what Qwen2.5-Coder writes.
HERMES_SHAPES = {
    "fenced": '```json\n{"name": "get_weather"',
    "wrapped": '<response>{"name": "get_weather"',
    "function_tag": "<function=get_weather>",
    "bare_json": '{"name": "get_weather"',
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("shape", sorted(HERMES_SHAPES))
def test_openai_reads_each_hermes_shape_as_a_call(oai, shape, stream):
    request = {
        "model": "gemma3:270m",
        "messages": [*ASK, {"role": "assistant", "content": HERMES_SHAPES[shape]}],
        "tools": [WEATHER],
        "parallel_tool_calls": False,
        "temperature": 0,
        "max_tokens": 60,
    }
    if stream:
        chunks = list(oai.chat.completions.create(stream=True, **request))
        deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
        name = deltas[0].function.name
        arguments = "".join(d.function.arguments or "" for d in deltas)
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = chunks[-1].choices[0].finish_reason
    else:
        [choice] = oai.chat.completions.create(**request).choices
        [call] = choice.message.tool_calls
        name, arguments = call.function.name, call.function.arguments
        content, finish = choice.message.content or "", choice.finish_reason
    assert (name, finish, content) == ("get_weather", "tool_calls", "")
    jsonschema.validate(json.loads(arguments), SCHEMA)


def test_openai_parallel_calls(oai):
    completion = oai.chat.completions.create(
        model="gemma3:270m",
        messages=[*ASK, {"role": "assistant", "content": "<tool_call>\n"}],
        tools=[WEATHER, TIME],
        temperature=0,
        max_tokens=90,
    )
    calls = completion.choices[0].message.tool_calls
    assert len(calls) >= 2 and completion.choices[0].finish_reason == "tool_calls"
    assert len({c.id for c in calls}) == len(calls)
    for call in calls:
        assert call.function.name in ("get_weather", "get_time")
        json.loads(call.function.arguments)


def test_openai_tool_loop_round_trip(oai):
    first = oai.chat.completions.create(
        model="gemma3:270m",
        messages=ASK,
        tools=[WEATHER],
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=120,
    )
    message = first.choices[0].message
    [call] = message.tool_calls
    follow = oai.chat.completions.create(
        model="gemma3:270m",
        messages=[
            *ASK,
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "18 degrees, sunny"},
        ],
        tools=[WEATHER],
        tool_choice="none",
        temperature=0,
        max_tokens=10,
    )
    assert follow.choices[0].message.content


def test_anthropic_auto_tool_use(server):
    client = anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0)
    tools = [
        {
            "name": "get_weather",
            "description": WEATHER["function"]["description"],
            "input_schema": SCHEMA,
        }
    ]
    request = {
        "model": "gemma3:270m",
        "max_tokens": 120,
        "extra_body": {"temperature": 0},  # this SDK version no longer sends it itself
        "messages": ASK,
        "tools": tools,
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    }
    message = client.messages.create(**request)
    assert message.stop_reason == "tool_use"
    [use] = [block for block in message.content if block.type == "tool_use"]
    assert use.name == "get_weather" and use.id.startswith("toolu_")
    jsonschema.validate(use.input, SCHEMA)
    with client.messages.stream(**request) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "tool_use"
    [streamed_use] = [block for block in streamed.content if block.type == "tool_use"]
    assert streamed_use.input == use.input


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_chat_tool_calls(server, stream):
    client = ollama.Client(host=server.base_url)
    answer = client.chat(
        model="gemma3:270m",
        messages=ASK,
        tools=[WEATHER],
        options={"temperature": 0, "num_predict": 70},
        stream=stream,
    )
    parts = list(answer) if stream else [answer]
    calls = [call for part in parts for call in (part.message.tool_calls or [])]
    assert calls and calls[0].function.name == "get_weather"
    jsonschema.validate(dict(calls[0].function.arguments), SCHEMA)
    assert all("<tool_call>\n{" not in (part.message.content or "") for part in parts)


def test_litellm_auto_tool_call(server):
    litellm = pytest.importorskip("litellm")
    response = litellm.completion(
        model="openai/gemma3:270m",
        api_base=server.url("/v1"),
        api_key="unused",
        messages=ASK,
        tools=[WEATHER],
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=120,
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), SCHEMA)


def test_langchain_ollama_tool_call(server):
    chat_models = pytest.importorskip("langchain_ollama")
    llm = chat_models.ChatOllama(
        model="gemma3:270m", base_url=server.base_url, temperature=0, num_predict=70
    )
    message = llm.bind_tools([WEATHER]).invoke(ASK[0]["content"])
    assert message.tool_calls and message.tool_calls[0]["name"] == "get_weather"
    jsonschema.validate(message.tool_calls[0]["args"], SCHEMA)


def test_raw_http_auto_call_has_no_marker_in_content(server):
    body = {
        "model": "gemma3:270m",
        "messages": ASK,
        "tools": [WEATHER],
        "parallel_tool_calls": False,
        "temperature": 0,
        "max_tokens": 120,
    }
    answer = httpx.post(server.url("/v1/chat/completions"), json=body, timeout=120).json()
    message = answer["choices"][0]["message"]
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


# --- gpt-oss's Harmony calls, held to the schema -------------------------------------------------

HARMONY_ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.mark.parametrize(
    ("choice", "named", "prefill"),
    [
        ("auto", None, "<|channel|>commentary to=functions."),
        ("required", None, ""),
        ("named", "get_time", ""),
    ],
)
def test_a_harmony_call_is_held_to_the_schema(model, choice, named, prefill):
    """Gemma's weights under gpt-oss's template (its markers are text in Gemma's vocabulary):
    under auto the grammar waits for `to=functions.` (here the prefill), a forced call holds
    from the first token; the arguments follow the named tool's schema."""
    original = ChatTemplate.from_gguf_metadata(model.file.metadata)
    model.__dict__["chat_template"] = ChatTemplate(
        BUILTIN_TEMPLATES["harmony"], bos_token=original.bos_token, eos_token=original.eos_token
    )
    assert format_of(model.chat_template.source).name == "harmony"
    messages = HARMONY_ASK + ([{"role": "assistant", "content": prefill}] if prefill else [])
    ids = chat.chat_prompt(model, messages, tools=[WEATHER, TIME])
    grammar = chat.tool_grammar(model, [WEATHER, TIME], choice, named, prefill=prefill)
    generation = model.generate(ids, max_tokens=80, temperature=0, grammar=grammar)
    answer = chat.answer_reader(model, ids, [WEATHER, TIME], prefill)
    for piece in generation.pieces():
        answer.feed(piece)
    answer.finish()
    assert generation.finish_reason == "stop", generation.text
    [call] = answer.calls
    if named:
        assert call.name == named
    tool = WEATHER if call.name == "get_weather" else TIME
    jsonschema.validate(call.arguments, tool["function"]["parameters"])


@pytest.fixture(scope="module")
def gpt_oss(launch, tmp_path_factory):
    """A server of the synthetic gpt-oss model (tests/data/families: random weights, the
    built-in Harmony template): what it writes is noise but for what the grammar holds."""
    models = tmp_path_factory.mktemp("gpt-oss-models")
    path = families.model_file("gpt-oss-MXFP4_MOE", models)
    running = launch(tmp_path_factory.mktemp("gpt-oss-home"), "--models-dir", str(models))
    running.model = str(path)
    return running


@pytest.mark.parametrize("tool_choice", ["required", "named"])
def test_gpt_oss_forced_calls_have_valid_arguments(gpt_oss, tool_choice):
    client = openai.OpenAI(base_url=gpt_oss.url("/v1"), api_key="unused", max_retries=0)
    choice = (
        {"type": "function", "function": {"name": "get_time"}}
        if tool_choice == "named"
        else "required"
    )
    completion = client.chat.completions.create(
        model=gpt_oss.model,
        messages=HARMONY_ASK,
        tools=[WEATHER, TIME],
        tool_choice=choice,
        temperature=0,
        max_tokens=120,
    )
    [result] = completion.choices
    assert result.finish_reason == "tool_calls", result.message
    [call] = result.message.tool_calls
    tool = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
    if tool_choice == "named":
        assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])
    # The Responses API, on the same grammar.
    flat = [{"type": "function", **t["function"]} for t in (WEATHER, TIME)]
    response = client.responses.create(
        model=gpt_oss.model,
        input="What is the weather in Paris?",
        tools=flat,
        tool_choice="required"
        if tool_choice == "required"
        else {"type": "function", "name": "get_time"},
        temperature=0,
        max_output_tokens=120,
        store=False,
    )
    [item] = [item for item in response.output if item.type == "function_call"]
    tool = {"get_weather": WEATHER, "get_time": TIME}[item.name]
    jsonschema.validate(json.loads(item.arguments), tool["function"]["parameters"])


@pytest.fixture(scope="module")
def harmony_vocab_model(tmp_path_factory, gemma_path):
    """Gemma's weights with gpt-oss's template and three of its unused control tokens renamed
    `<|channel|>`, `<|constrain|>` and `<|message|>`: the header's markers are tokens of their
    own here, as in gpt-oss's vocabulary."""
    source = read(str(gemma_path))
    tokens = list(source.metadata["tokenizer.ggml.tokens"])
    assert tokens[6:9] == ["<unused0>", "<unused1>", "<unused2>"]
    tokens[6:9] = ["<|channel|>", "<|constrain|>", "<|message|>"]
    metadata = {
        **source.metadata,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.chat_template": BUILTIN_TEMPLATES["harmony"],
    }
    path = tmp_path_factory.mktemp("harmony-vocab") / "harmony-vocab.gguf"
    writer.write(path, metadata, source.tensors)
    loaded = llamay.load(str(path))
    yield loaded
    loaded.close()


def test_a_harmony_call_with_the_markers_own_tokens_is_held_to_the_schema(harmony_vocab_model):
    model = harmony_vocab_model
    assert format_of(model.chat_template.source).name == "harmony"
    markers = [6, 7, 8]
    # Always rendered (llama.cpp's rule for gpt-oss's markers): text a grammar can hold.
    assert [model.tokenizer.token_to_piece(t) for t in markers] == [
        b"<|channel|>",
        b"<|constrain|>",
        b"<|message|>",
    ]
    ids = chat.chat_prompt(model, HARMONY_ASK, tools=[WEATHER, TIME])
    grammar = chat.tool_grammar(model, [WEATHER, TIME], "named", "get_weather")
    # The bias makes the model take each marker's own token wherever the grammar allows it.
    bias = dict.fromkeys(markers, 50.0)
    generation = model.generate(ids, max_tokens=80, temperature=0, grammar=grammar, logit_bias=bias)
    answer = chat.answer_reader(model, ids, [WEATHER, TIME])
    for piece in generation.pieces():
        answer.feed(piece)
    answer.finish()
    assert generation.finish_reason == "stop", generation.text
    written = generation.tokens
    assert written[0] == 6  # <|channel|>, its own token, opens the call
    assert 7 in written and 8 in written  # <|constrain|> and <|message|> in the header
    [call] = answer.calls
    assert call.name == "get_weather"
    jsonschema.validate(call.arguments, SCHEMA)


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        (" <|constrain|>json", True),  # as gpt-oss writes a call
        ("<|channel|>commentary json", True),  # as its template writes past calls
        ("<|channel|>commentary <|constrain|>json", True),
        ("", True),
        ("json", False),  # would read back as a call of `get_timejson`
        ("<|channel|>commentaryjson", False),
    ],
)
def test_the_harmony_header_keeps_json_apart_from_the_name(header, accepted):
    grammar = call_grammar(FORMATS["harmony"], [TIME], "named", "get_time")
    text = f'<|channel|>commentary to=functions.get_time{header}<|message|>{{"zone": "UTC"}}'
    assert grammar.accepts(text) is accepted
    if accepted:
        _, [call] = parse_calls(text, FORMATS["harmony"], [TIME])
        assert (call.name, call.arguments) == ("get_time", {"zone": "UTC"})
