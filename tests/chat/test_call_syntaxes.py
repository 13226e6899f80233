"""Tool calls as models write them, read back whole and as they stream, held by the grammar
from each shape's opening (llamay/chat/syntaxes.py, toolcalls.py), with no model.

Every shape of llama.cpp's parsers that llamay reads is here, in the family whose templates
teach it or whose models are seen to write it; and the texts that only look like calls (JSON
that names no offered tool, prose around code, a marker written as prose) stay text.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import llamay
from llamay.chat import render_chat
from llamay.chat.calls import ToolCall
from llamay.chat.toolcalls import FORMATS, CallParser, call_grammar, format_of, parse_calls
from llamay.grammar.lazy import LazyGrammar
from llamay.tokenizer.chat import ChatTemplate

TEMPLATES = Path(__file__).parents[1] / "data" / "chat_templates"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "C/F"},
                "days": {"type": "integer", "description": "How many days ahead."},
            },
            "required": ["city"],
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
            "properties": {"zone": {"type": "string", "description": "The zone."}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]
PARIS = ("get_weather", {"city": "Paris"})
CET = ("get_time", {"zone": "CET"})
# What Qwen2.5-Coder-1.5B-Instruct answers, word for word, to "What is the weather like in
# Paris right now? Use the tool." with its own (Hermes) template
QWEN_CODER = (
    '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris",\n'
    '    "unit": "celsius"\n  }\n}\n```'
)

# (family, the answer, the text besides the calls, the calls, their ids where the model wrote
# them)
CALLS = [
    (  # a second call cut off by max_tokens is no text the model meant
        "hermes",
        '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro',
        "",
        [CET],
    ),
    (
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "",
        [PARIS],
    ),
    (
        "hermes",
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>',
        "Let me look.\n",
        [PARIS, CET],
    ),
    ("hermes", QWEN_CODER, "", [("get_weather", {"city": "Paris", "unit": "celsius"})]),
    (
        "hermes",
        '```xml\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n```',
        "",
        [PARIS],
    ),
    (
        "hermes",
        '```\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"zone": "CET"}}]\n```',
        "",
        [PARIS, CET],
    ),
    ("hermes", '<function=get_weather>{"city": "Paris"}</function>', "", [PARIS]),
    ("hermes", '<function name="get_weather">{"city": "Paris"}</function>', "", [PARIS]),
    (
        "hermes",
        'Sure. <function_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</function_call>',
        "Sure. ",
        [PARIS],
    ),
    *[
        (
            "hermes",
            f'<{tag}>\n{{"name": "get_time", "arguments": {{"zone": "CET"}}}}\n</{tag}>',
            "",
            [CET],
        )
        for tag in ("tools", "tool", "response", "json", "xml", "JSON")
    ],
    ("hermes", '{"name": "get_weather", "arguments": {"city": "Paris"}}', "", [PARIS]),
    (
        "hermes",
        '  {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n',
        "",
        [PARIS],
    ),
    (
        "qwen3_coder",
        "I will check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "I will check.\n",
        [("get_weather", {"city": "Paris", "days": 3})],
    ),
    (
        "qwen3_coder",
        "<function=get_weather>\n<parameter=city>\n12\n</parameter>\n</function>",
        "",
        [("get_weather", {"city": "12"})],
    ),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}}', "", [PARIS]),
    (
        "llama3",
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
        "",
        [PARIS],
    ),
    (
        "llama3",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        "",
        [PARIS],
    ),
    (
        "llama3",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {"zone": "CET"}}',
        "",
        [PARIS, CET],
    ),
    (
        "mistral",
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        "",
        [PARIS],
    ),
    (
        "mistral",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}]',
        "",
        [PARIS],
    ),
    ("mistral_named", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', "", [PARIS]),
    (
        "mistral_named",
        '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}',
        "",
        [PARIS, CET],
    ),
    (
        "command_r7b",
        '<|START_THINKING|>The weather.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", '
        '"tool_name": "get_weather", "parameters": {"city": "Paris"}}\n]<|END_ACTION|>',
        "<|START_THINKING|>The weather.<|END_THINKING|>",
        [PARIS],
    ),
    (
        "command_r",
        'Plan: look it up.\nAction: ```json\n[\n    {\n        "tool_name": "get_weather",\n'
        '        "parameters": {"city": "Paris"}\n    }\n]\n```',
        "Plan: look it up.\n",
        [PARIS],
    ),
    (
        "granite",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        "",
        [PARIS],
    ),
    (
        "deepseek_r1",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "",
        [PARIS],
    ),
    (
        "deepseek_r1",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
        '<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"zone": "CET"}'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "",
        [PARIS, CET],
    ),
    (
        "harmony",
        'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
        "",
        [PARIS],
    ),
    ("json", '{"name": "get_weather", "arguments": {"city": "Paris"}}', "", [PARIS]),
    (
        "json",
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n',
        "",
        [PARIS],
    ),
]
IDS = {
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}]': [
        "a1B2c3D4e"
    ],
}

# Texts that only look like calls: all text, nothing held back at the end.
NOT_CALLS = [
    ("hermes", 'Here it is: ```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'),
    (
        "hermes",
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\nThat calls it.',
    ),
    ("hermes", '```json\n{"name": "get_forecast", "arguments": {"city": "Paris"}}\n```'),
    ("hermes", '```json\n{"city": "Paris", "temperature": 18}\n```'),
    ("hermes", "```python\nprint({'name': 'get_weather'})\n```"),
    ("hermes", "Write <tool_call> tags around a call."),
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'),
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": ["Paris"]}</tool_call>'),
    ("hermes", '<function=get_news>{"topic": "x"}</function>'),
    ("hermes", 'The call {"name": "get_weather", "arguments": {"city": "Paris"}} is JSON.'),
    ("json", "The weather is {unknown}."),
    ("mistral", "[TOOL_CALLS] nothing here"),
    ("granite", "<|tool_call|>not a list"),
    ("deepseek_r1", "<｜tool▁calls▁begin｜>no call"),
]


def _pairs(calls):
    return [(c.name, c.arguments) for c in calls]


def _streamed(fmt, text, step):
    """(the text pushed out as it came, the text at the end, the calls) of `text` in pieces."""
    parser = CallParser(FORMATS[fmt], TOOLS)
    out = "".join(parser.push(text[i : i + step]) for i in range(0, len(text), step))
    rest, calls = parser.finish()
    return out, rest, calls


@pytest.mark.parametrize(("fmt", "text", "besides", "calls"), CALLS)
def test_each_shape_is_read_whole_and_streamed(fmt, text, besides, calls):
    found_text, found = parse_calls(text, FORMATS[fmt], TOOLS)
    assert _pairs(found) == calls
    assert found_text == besides
    if text in IDS:
        assert [c.id for c in found] == IDS[text]
    for step in (1, 3, 7):
        out, rest, streamed = _streamed(fmt, text, step)
        assert _pairs(streamed) == calls
        assert out + rest == besides


@pytest.mark.parametrize(("fmt", "text"), NOT_CALLS)
def test_what_only_looks_like_a_call_is_text(fmt, text):
    assert parse_calls(text, FORMATS[fmt], TOOLS) == (text, [])
    for step in (1, 4):
        out, rest, calls = _streamed(fmt, text, step)
        assert calls == [] and out + rest == text


def test_text_before_a_call_streams_before_the_call_is_complete():
    parser = CallParser(FORMATS["hermes"], TOOLS)
    assert parser.push("Let me check the weather.\n<tool") == "Let me check the weather.\n"
    assert parser.push('_call>\n{"name": "get_') == ""
    assert parser.push('weather", "arguments": {"city": "Paris"}}\n</tool_call>') == ""
    assert parser.calling
    rest, [call] = parser.finish()
    assert rest == "" and (call.name, call.arguments) == PARIS


def test_a_false_opening_is_let_go_as_soon_as_it_fails():
    parser = CallParser(FORMATS["hermes"], TOOLS)
    assert parser.push("Wrap it in <tool") == "Wrap it in "
    assert parser.push("_call> tags") == "<tool_call> tags"  # no call object follows
    assert parser.push(". Or as ```json") == ". Or as ```json"  # a fence only opens an answer
    assert not parser.calling and parser.finish() == ("", [])


def test_an_answer_that_may_open_with_json_is_held_until_it_cannot():
    parser = CallParser(FORMATS["json"], TOOLS)
    assert parser.push("  ") == ""  # the answer may yet open with a call
    assert parser.push('{"na') == ""
    assert parser.push('me": "sunny"}') == '  {"name": "sunny"}'  # names no tool


# Each shape as a model may write it under "auto": from its opening, what the grammar holds.
HELD = [
    ("hermes", QWEN_CODER),
    (
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    ),
    (
        "hermes",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    ),
    ("hermes", '<function=get_weather>{"city": "Paris"}</function>'),
    ("hermes", '<response>{"name": "get_time", "arguments": {"zone": "CET"}}</response>'),
    (
        "hermes",
        '```xml\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n```',
    ),
    (
        "hermes",
        '```\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"zone": "CET"}}]\n```',
    ),
    ("hermes", '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}'),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    (
        "llama3",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}\n{"name": "get_time", "parameters": {"zone": "CET"}}',
    ),
    ("json", '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    (
        "mistral_named",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}',
    ),
    (
        "command_r",
        'Action: ```json\n[\n    {\n        "tool_name": "get_weather",\n        "parameters": {"city": "Paris"}\n    }\n]\n```',
    ),
    (
        "command_r7b",
        'Action: ```json\n[{"tool_name": "get_weather", "parameters": {"city": "Paris"}}]\n```',
    ),
    ("granite", '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'),
    ("deepseek_r1", '{"name": "get_weather", "arguments": {"city": "Paris"}}'),
    ("harmony", ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}'),
]


@pytest.mark.parametrize(("fmt", "text"), HELD)
def test_the_auto_grammar_holds_each_shape_from_its_opening(fmt, text):
    grammar = call_grammar(FORMATS[fmt], TOOLS, "auto")
    assert isinstance(grammar, LazyGrammar)
    assert grammar.grammar.accepts(text)
    assert parse_calls(text.strip(), FORMATS[fmt], TOOLS)[1]  # and what it holds reads back


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("hermes", '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>'),
        (
            "qwen3_coder",
            "<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>",
        ),
        ("llama3", '{"name": "get_time", "parameters": {"zone": "CET"}}'),
        ("json", '{"name": "get_time", "arguments": {"zone": "CET"}}'),
        (
            "mistral",
            '[TOOL_CALLS] [{"name": "get_time", "arguments": {"zone": "CET"}, "id": "a1B2c3D4e"}]',
        ),
        ("mistral_named", '[TOOL_CALLS]get_time[CALL_ID]a1B2c3D4e[ARGS]{"zone": "CET"}'),
        (
            "command_r7b",
            '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_time", "parameters": {"zone": "CET"}}]<|END_ACTION|>',
        ),
        (
            "command_r",
            'Action: ```json\n[{"tool_name": "get_time", "parameters": {"zone": "CET"}}]\n```',
        ),
        ("granite", '<|tool_call|>[{"name": "get_time", "arguments": {"zone": "CET"}}]'),
        (
            "deepseek_r1",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
            '{"zone": "CET"}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        ),
        (
            "harmony",
            '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "CET"}',
        ),
    ],
)
def test_a_forced_call_is_the_familys_own_shape(fmt, text):
    for choice, name in (("required", None), ("named", "get_time")):
        grammar = call_grammar(FORMATS[fmt], TOOLS, choice, name)
        assert grammar.accepts(text), (choice, text)
    assert not call_grammar(FORMATS[fmt], TOOLS, "named", "get_weather").accepts(text)


def test_forced_calls_hold_the_arguments_to_the_schema():
    grammar = call_grammar(FORMATS["hermes"], TOOLS, "required")
    assert not grammar.accepts('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    qwen = call_grammar(FORMATS["qwen3_coder"], [WEATHER], "required")
    one = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n{}</function>\n</tool_call>"
    assert qwen.accepts(one.format("<parameter=unit>\ncelsius\n</parameter>\n"))
    assert not qwen.accepts(one.format("<parameter=unit>\nkelvin\n</parameter>\n"))
    assert not qwen.accepts(one.format("<parameter=days>\nthree\n</parameter>\n"))


# --- the lazy grammar's triggers, token by token ---------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(data_dir):
    return llamay.load_tokenizer(data_dir / "vocab" / "ggml-vocab-qwen2.gguf")


def _triggered(fmt, text, tokenizer):
    matcher = call_grammar(FORMATS[fmt], TOOLS, "auto").matcher(tokenizer)
    for token in tokenizer.tokenize(text, add_bos=False):
        mask = matcher.allowed()
        if mask is not None:
            assert mask[token], (text, token)
        matcher.accept(token)
    return matcher.triggered


@pytest.mark.parametrize(
    ("fmt", "text", "triggered"),
    [
        ("hermes", QWEN_CODER, True),
        ("hermes", "Sure.\n<tool_call>\n", True),
        ("hermes", '<tools>{"name": "get_time", "arguments": {"zone": "CET"}}</tools>', True),
        ("hermes", '```json\n{"name": "get_forecast"', False),  # no such tool: free
        ("hermes", 'See ```json\n{"name": "get_weather", "arguments": {}}\n```', False),
        ("hermes", '```json\n{"city": "Paris"}\n```', False),
        ("json", '{\n  "name": "get_time"', True),
        (
            "qwen3_coder",
            "<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n",
            True,
        ),
        ("mistral_named", "[TOOL_CALLS]get_time[ARGS]", True),
        ("granite", "<|tool_call|>[", True),
        ("command_r", 'Action: ```json\n[{"tool_name": "get_time"', True),
        ("deepseek_r1", "<｜tool▁calls▁begin｜>", True),
    ],
)
def test_each_opening_turns_the_grammar_on_and_others_do_not(fmt, text, triggered, tokenizer):
    assert _triggered(fmt, text, tokenizer) is triggered


def test_once_on_the_grammar_holds_the_arguments(tokenizer):
    matcher = call_grammar(FORMATS["hermes"], TOOLS, "auto").matcher(tokenizer)
    for token in tokenizer.tokenize(
        '```json\n{"name": "get_weather", "arguments": {', add_bos=False
    ):
        matcher.accept(token)
    assert matcher.triggered
    refused = False
    for token in tokenizer.tokenize('"country": "FR"}', add_bos=False):
        if not matcher.allowed()[token]:
            refused = True  # get_weather has no argument "country"
            break
        matcher.accept(token)
    assert refused


# --- the templates' families, and calls written back in them --------------------------------

FAMILY_OF = {
    "CohereForAI-c4ai-command-r-plus-tool_use": "command_r",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command_r7b",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "hermes",
    "Qwen-Qwen3-Coder-30B-A3B-Instruct": "qwen3_coder",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek_r1",
    "ibm-granite-granite-3.3-2B-Instruct": "granite",
    "mistralai-Mistral-Nemo-Instruct-2407": "mistral",
    "mistralai-Mistral-Small-3.2-24B-Instruct-2506": "mistral_named",
    "openai-gpt-oss-120b": "harmony",
    "Qwen-Qwen2.5-7B-Instruct": "hermes",
    "Qwen-Qwen3-0.6B": "hermes",
    "mistralai-Mistral-7B-Instruct-v0.3": "mistral",
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


@pytest.mark.parametrize("name", sorted(FAMILY_OF))
def test_a_template_writes_an_earlier_call_the_way_its_family_reads_it(name):
    path = next(TEMPLATES.rglob(f"{name}.jinja"))
    model = SimpleNamespace(
        chat_template=ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>")
    )
    fmt = format_of(model.chat_template.source)
    assert fmt.name == FAMILY_OF[name]
    prompt = render_chat(model, HISTORY, tools=[WEATHER])
    _, calls = parse_calls(prompt, fmt, [WEATHER])
    assert _pairs(calls) == [("get_weather", {"city": "Rome"})]
    assert "The current weather in a city." in prompt  # the definitions are there too


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "harmony"])
def test_a_call_written_back_is_what_the_family_holds_and_reads(fmt):
    family = FORMATS[fmt]
    write = family.syntaxes[0].write or next(s.write for s in family.syntaxes if s.write)
    call = ToolCall("get_weather", {"city": "Paris", "days": 2}, "a1B2c3D4e")
    text = write([call], family.arguments_key)
    assert _pairs(parse_calls(text, family, TOOLS)[1]) == [(call.name, call.arguments)]
    if family.syntaxes[0].write is not None:
        assert call_grammar(family, TOOLS, "required").accepts(text), text
