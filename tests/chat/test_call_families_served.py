"""Each family's tool calls through a real `llamay serve` and the official openai SDK.

The models are tiny random ones (a byte vocabulary spells any marker), one per chat template of
tests/data/chat_templates: what they write is noise but for what the grammar holds, so every
call that comes back was held by the family's grammar, from the first token ("required"), or
from an opening the answer was prefilled with ("auto"), and read back by its parser, whole and
streamed.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import openai
import pytest

from llamay.models import synthetic

from helpers.serving import start_server, stop_server

pytestmark = pytest.mark.slow  # it starts a server

TEMPLATES = Path(__file__).parents[1] / "data" / "chat_templates"
FAMILY_TEMPLATES = {
    "hermes": "Qwen-Qwen2.5-7B-Instruct",
    "qwen3_coder": "tool_families/Qwen-Qwen3-Coder-30B-A3B-Instruct",
    "llama3": "meta-llama-Llama-3.3-70B-Instruct",
    "json": "google-gemma-3-270m-it",
    "mistral": "tool_families/mistralai-Mistral-Nemo-Instruct-2407",
    "mistral_named": "tool_families/mistralai-Mistral-Small-3.2-24B-Instruct-2506",
    "command_r": "tool_families/CohereForAI-c4ai-command-r-plus-tool_use",
    "command_r7b": "tool_families/CohereForAI-c4ai-command-r7b-12-2024-tool_use",
    "granite": "tool_families/ibm-granite-granite-3.3-2B-Instruct",
    "deepseek_r1": "tool_families/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "harmony": "tool_families/openai-gpt-oss-120b",
}
# An answer prefilled with a call's opening, up to the tool's name: "auto"'s grammar holds the
# rest from there.
OPENINGS = {
    "hermes": '<tool_call>\n{"name": "get_time"',
    "qwen3_coder": "<tool_call>\n<function=get_time>",
    "llama3": '{"name": "get_time"',
    "json": '```json\n{"name": "get_time"',
    "mistral": "[TOOL_CALLS]",
    "mistral_named": "[TOOL_CALLS]get_time",
    "command_r": 'Action: ```json\n[{"tool_name": "get_time"',
    "command_r7b": "<|START_ACTION|>",
    "granite": "<|tool_call|>",
    "deepseek_r1": "<｜tool▁calls▁begin｜>",
    "harmony": "<|channel|>commentary to=functions.",
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 8, "description": "The city."},
                "unit": {"enum": ["celsius", "fahrenheit"], "description": "The unit."},
            },
            "required": ["city", "unit"],
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
            "properties": {"zone": {"type": "string", "maxLength": 6, "description": "The zone."}},
            "required": ["zone"],
        },
    },
}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server, a tiny model per family: {family: (client, model name)}."""
    models = tmp_path_factory.mktemp("family-models")
    vocabulary = synthetic.vocabulary(["▁"], byte_fallback=True)
    paths = {}
    for family, template in FAMILY_TEMPLATES.items():
        paths[family] = synthetic.write_model(
            models / f"{family}.gguf",
            "llama",
            vocabulary,
            n_embd=64,
            n_ff=96,
            n_layer=2,
            n_head=4,
            n_head_kv=2,
            head_dim=16,
            context_length=8192,
            weight_type="F32",
            metadata={"tokenizer.chat_template": (TEMPLATES / f"{template}.jinja").read_text()},
            seed=3,
        )
    home = tmp_path_factory.mktemp("family-home")
    running = start_server(home, "--models-dir", str(models), "--ctx-size", "8192")
    client = openai.OpenAI(base_url=running.url("/v1"), api_key="unused", max_retries=0)
    yield {family: (client, str(path)) for family, path in paths.items()}
    stop_server(running)


def _check(calls, finish_reason, named=None):
    assert finish_reason == "tool_calls"
    [call] = calls
    if named:
        assert call.function.name == named
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    assert call.id.startswith("call_")


def _streamed(client, **request):
    chunks = list(client.chat.completions.create(stream=True, **request))
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas, chunks
    head = deltas[0]
    arguments = "".join(d.function.arguments or "" for d in deltas)
    call = head.model_copy(
        update={"function": head.function.model_copy(update={"arguments": arguments})}
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return [call], chunks[-1].choices[0].finish_reason, content


@pytest.mark.parametrize("family", sorted(FAMILY_TEMPLATES))
def test_a_required_call_in_each_family(served, family):
    client, model = served[family]
    request = {
        "model": model,
        "messages": ASK,
        "tools": [WEATHER, TIME],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0,
        "max_tokens": 400,
    }
    completion = client.chat.completions.create(**request)
    [choice] = completion.choices
    _check(choice.message.tool_calls, choice.finish_reason)
    calls, finish_reason, _ = _streamed(client, **request)
    _check(calls, finish_reason)
    assert calls[0].function.arguments == choice.message.tool_calls[0].function.arguments


@pytest.mark.parametrize("family", sorted(FAMILY_TEMPLATES))
def test_an_auto_call_from_each_familys_opening(served, family):
    client, model = served[family]
    request = {
        "model": model,
        "messages": [*ASK, {"role": "assistant", "content": OPENINGS[family]}],
        "tools": [WEATHER, TIME],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "temperature": 0,
        "max_tokens": 400,
    }
    completion = client.chat.completions.create(**request)
    [choice] = completion.choices
    named = "get_time" if "get_time" in OPENINGS[family] else None
    _check(choice.message.tool_calls, choice.finish_reason, named)
    assert not choice.message.content
    calls, finish_reason, content = _streamed(client, **request)
    _check(calls, finish_reason, named)
    assert content == ""
