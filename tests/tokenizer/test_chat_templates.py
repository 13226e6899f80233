"""Chat templates: real models' templates, the built-in ones against them, and the sandbox's limits."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from llamay import gguf
from llamay.errors import TokenizerError
from llamay.tokenizer.chat import ChatTemplate, ChatTemplateError, template_source
from llamay.tokenizer.chat_builtin import BUILTIN_TEMPLATES, guess_builtin

TEMPLATES = Path(__file__).parent.parent / "data" / "chat_templates"

GEMMA3 = "google-gemma-3-270m-it.jinja"
LLAMA2 = "meta-llama-Llama-2-7b-chat-hf.jinja"
LLAMA3 = "meta-llama-Meta-Llama-3-8B-Instruct.jinja"
LLAMA32 = "meta-llama-Llama-3.2-3B-Instruct.jinja"
LLAMA33 = "meta-llama-Llama-3.3-70B-Instruct.jinja"
MISTRAL = "mistralai-Mistral-7B-Instruct-v0.3.jinja"
PHI35 = "microsoft-Phi-3.5-mini-instruct.jinja"
QWEN25 = "Qwen-Qwen2.5-7B-Instruct.jinja"
QWEN3 = "Qwen-Qwen3-0.6B.jinja"

SYSTEM_AND_USER = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hello!"},
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

# An OpenAI client's conversation: arguments arrive as JSON text, content is null beside tool calls.
TOOL_CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call00001",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call00001", "content": '{"temperature": 21}'},
]

QWEN_TOOLS_SYSTEM = (
    "<|im_start|>system\nYou are terse.\n\n# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "get_weather", "description": "Current weather", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n'
    "</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)
QWEN_TOOL_TURNS = (
    "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    "</tool_call><|im_end|>\n"
    '<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>\n'
    "<|im_start|>assistant\n"
)


def real(name: str, bos_token: str = "", eos_token: str = "") -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(), bos_token=bos_token, eos_token=eos_token)


# --- the real model --------------------------------------------------------------------------------


def test_gemma_model_renders_gemma3_format(gemma_path):
    # This GGUF carries no tokenizer.chat_template: the built-in gemma template stands in, with
    # the BOS string taken from the file's vocabulary, and renders what Gemma 3's own template does.
    metadata = gguf.read(gemma_path).metadata
    assert "tokenizer.chat_template" not in metadata
    template = ChatTemplate.from_gguf_metadata(metadata)
    prompt = template.render(SYSTEM_AND_USER)
    assert prompt == (
        "<bos><start_of_turn>user\nYou are terse.\n\nHello!<end_of_turn>\n<start_of_turn>model\n"
    )
    assert prompt == real(GEMMA3, bos_token="<bos>").render(SYSTEM_AND_USER)


# --- real templates ---------------------------------------------------------------------------------


def test_gemma3_template_folds_system_into_first_user_turn():
    conversation = [
        *SYSTEM_AND_USER,
        {"role": "assistant", "content": " Hi. "},
        {"role": "user", "content": [{"type": "text", "text": "Again?"}]},
    ]
    assert real(GEMMA3, bos_token="<bos>").render(conversation) == (
        "<bos><start_of_turn>user\nYou are terse.\n\nHello!<end_of_turn>\n"
        "<start_of_turn>model\nHi.<end_of_turn>\n"
        "<start_of_turn>user\nAgain?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_gemma3_template_refuses_unalternating_roles():
    with pytest.raises(
        ChatTemplateError, match="chat template raised: Conversation roles must alternate"
    ):
        real(GEMMA3).render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_llama33_renders_tools_in_first_user_message_and_json_calls():
    prompt = real(LLAMA33, bos_token="<|begin_of_text|>").render(
        TOOL_CONVERSATION, tools=[WEATHER_TOOL]
    )
    assert prompt == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
        "You are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n"
        "Given the following functions, please respond with a JSON for a function call with its "
        "proper arguments that best answers the given prompt.\n\n"
        'Respond in the format {"name": function name, "parameters": dictionary of argument name '
        "and its value}.Do not use variables.\n\n"
        "{\n"
        '    "type": "function",\n'
        '    "function": {\n'
        '        "name": "get_weather",\n'
        '        "description": "Current weather",\n'
        '        "parameters": {\n'
        '            "type": "object",\n'
        '            "properties": {\n'
        '                "city": {\n'
        '                    "type": "string"\n'
        "                }\n"
        "            },\n"
        '            "required": [\n'
        '                "city"\n'
        "            ]\n"
        "        }\n"
        "    }\n"
        "}\n\n"
        "Weather in Paris?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>'
        # Meta's template JSON-encodes every tool result, strings included (`is iterable`).
        "<|start_header_id|>ipython<|end_header_id|>\n\n"
        '"{\\"temperature\\": 21}"<|eot_id|>'
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_llama33_without_tools_has_no_tool_preamble():
    prompt = real(LLAMA33, bos_token="<|begin_of_text|>").render(
        [*SYSTEM_AND_USER, {"role": "assistant", "content": "Hi.", "tool_calls": None}],
        add_generation_prompt=False,
    )
    assert prompt == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
        "You are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHi.<|eot_id|>"
    )


def test_llama32_dates_the_system_prompt_with_strftime_now():
    def expected(date: str) -> str:
        return (
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            f"Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n"
            "You are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )

    before = time.strftime("%d %b %Y")
    prompt = real(LLAMA32, bos_token="<|begin_of_text|>").render(SYSTEM_AND_USER)
    after = time.strftime("%d %b %Y")  # the same, unless the render straddled midnight
    assert prompt in (expected(before), expected(after))


def test_qwen25_renders_tools_calls_and_responses():
    prompt = real(QWEN25).render(TOOL_CONVERSATION, tools=[WEATHER_TOOL])
    assert prompt == QWEN_TOOLS_SYSTEM + QWEN_TOOL_TURNS


def test_qwen3_renders_tools_and_the_enable_thinking_switch():
    template = real(QWEN3)
    assert (
        template.render(TOOL_CONVERSATION, tools=[WEATHER_TOOL])
        == QWEN_TOOLS_SYSTEM + QWEN_TOOL_TURNS
    )
    assert template.render(SYSTEM_AND_USER, enable_thinking=False) == (
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_qwen3_keeps_arguments_that_are_not_json_as_text():
    conversation = [
        {"role": "user", "content": "Go"},
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "run", "arguments": "not json"}}],
        },
    ]
    # (Qwen 3 gives the assistant turn after the last user message an empty thinking block.)
    assert real(QWEN3).render(conversation, add_generation_prompt=False) == (
        "<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        '<tool_call>\n{"name": "run", "arguments": not json}\n</tool_call><|im_end|>\n'
    )


def test_mistral_v03_renders_available_tools_calls_and_results():
    prompt = real(MISTRAL, bos_token="<s>", eos_token="</s>").render(
        TOOL_CONVERSATION, tools=[WEATHER_TOOL]
    )
    assert prompt == (
        '<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", '
        '"description": "Current weather", "parameters": {"type": "object", "properties": '
        '{"city": {"type": "string"}}, "required": ["city"]}}}][/AVAILABLE_TOOLS]'
        "[INST] You are terse.\n\nWeather in Paris?[/INST]"
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call00001"}]</s>'
        '[TOOL_RESULTS] {"content": {"temperature": 21}, "call_id": "call00001"}[/TOOL_RESULTS]'
    )


# --- built-in templates -----------------------------------------------------------------------------

# Each built-in template against its family's real template, on conversations both can render.
CONFORMANCE = [
    ("gemma", GEMMA3, "<bos>", "<eos>"),
    ("llama2", LLAMA2, "<s>", "</s>"),
    ("llama3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    ("mistral", MISTRAL, "<s>", "</s>"),
    ("phi3", PHI35, "<s>", "<|endoftext|>"),
    ("chatml", QWEN3, "", ""),
    ("qwen", QWEN25, "", ""),
]
CONVERSATIONS = {
    "system and user": SYSTEM_AND_USER,
    "three turns": [
        *SYSTEM_AND_USER,
        {"role": "assistant", "content": " Hi there. "},
        {"role": "user", "content": "Again?\n"},
    ],
    "no system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"},
    ],
}


CONFORMANCE_CASES = [
    pytest.param(builtin, source, bos, eos, conversation, id=f"{builtin}, {name}")
    for builtin, source, bos, eos in CONFORMANCE
    for name, conversation in CONVERSATIONS.items()
    # Qwen 2.5's default system prompt names Qwen; the built-in qwen brings Qwen 2's (tested below).
    if not (builtin == "qwen" and conversation[0]["role"] != "system")
]


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize(("builtin", "source", "bos", "eos", "conversation"), CONFORMANCE_CASES)
def test_builtin_matches_family_template(
    builtin, source, bos, eos, conversation, add_generation_prompt
):
    expected = real(source, bos, eos).render(
        conversation, add_generation_prompt=add_generation_prompt
    )
    rendered = ChatTemplate.builtin(builtin, bos, eos).render(
        conversation, add_generation_prompt=add_generation_prompt
    )
    assert rendered == expected


@pytest.mark.parametrize(
    ("builtin", "source", "bos", "eos"),
    [("qwen", QWEN25, "", ""), ("chatml", QWEN3, "", ""), ("mistral", MISTRAL, "<s>", "</s>")],
)
def test_builtin_tool_format_matches_family_template(builtin, source, bos, eos):
    expected = real(source, bos, eos).render(TOOL_CONVERSATION, tools=[WEATHER_TOOL])
    assert (
        ChatTemplate.builtin(builtin, bos, eos).render(TOOL_CONVERSATION, tools=[WEATHER_TOOL])
        == expected
    )


def test_builtin_qwen_brings_qwen2_default_system_prompt():
    assert ChatTemplate.builtin("qwen").render([{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_builtin_chatml_without_system_has_no_system_turn():
    assert ChatTemplate.builtin("chatml").render([{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_builtin_gemma_puts_tools_in_first_user_turn_and_results_in_a_user_turn():
    prompt = ChatTemplate.builtin("gemma", bos_token="<bos>").render(
        TOOL_CONVERSATION, tools=[WEATHER_TOOL]
    )
    tools_prompt = QWEN_TOOLS_SYSTEM.removeprefix("<|im_start|>system\nYou are terse.\n\n")
    assert prompt == (
        "<bos><start_of_turn>user\nYou are terse.\n\n"
        + tools_prompt.removesuffix("<|im_end|>\n")
        + "\n\nWeather in Paris?<end_of_turn>\n"
        '<start_of_turn>model\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call><end_of_turn>\n"
        '<start_of_turn>user\n<tool_response>\n{"temperature": 21}\n</tool_response><end_of_turn>\n'
        "<start_of_turn>model\n"
    )


def test_builtin_llama3_tools_use_json_calls_and_ipython_results():
    conversation = [TOOL_CONVERSATION[0], TOOL_CONVERSATION[2], TOOL_CONVERSATION[3]]
    tool = {"type": "function", "function": {"name": "get_weather"}}
    prompt = ChatTemplate.builtin("llama3", bos_token="<|begin_of_text|>").render(
        conversation, tools=[tool]
    )
    assert prompt == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "You have access to the following functions. To call a function, please respond with JSON "
        'for a function call.Respond in the format {"name": function name, "parameters": dictionary '
        "of argument name and its value}.Do not use variables.\n\n"
        '{\n    "type": "function",\n    "function": {\n        "name": "get_weather"\n    }\n}\n\n'
        "You are terse.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>'
        '<|start_header_id|>ipython<|end_header_id|>\n\n{"temperature": 21}<|eot_id|>'
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_builtin_phi3_groups_tool_results_in_one_user_turn():
    conversation = [
        {"role": "user", "content": "Two cities"},
        {"role": "tool", "content": "12"},
        {"role": "tool", "content": "15"},
    ]
    assert ChatTemplate.builtin("phi3").render(conversation) == (
        "<|user|>\nTwo cities<|end|>\n"
        "<|user|>\n<tool_response>\n12\n</tool_response>\n<tool_response>\n15\n</tool_response><|end|>\n"
        "<|assistant|>\n"
    )


@pytest.mark.parametrize("name", sorted(BUILTIN_TEMPLATES))
def test_builtin_refuses_unknown_roles(name):
    with pytest.raises(
        ChatTemplateError,
        match=f"chat template raised: the built-in {name} template knows the roles system, user, "
        'assistant and tool, not "developer"',
    ):
        ChatTemplate.builtin(name).render(
            [{"role": "user", "content": "a"}, {"role": "developer", "content": "b"}]
        )


def test_unknown_builtin_name_lists_the_choices():
    with pytest.raises(
        ChatTemplateError,
        match="no built-in chat template named 'vicuna'; choose one of: chatml, gemma",
    ):
        ChatTemplate.builtin("vicuna")


# --- choosing a template from GGUF metadata ---------------------------------------------------------

VOCAB = ["<unk>", "<s>", "</s>", "hello"]


def test_from_gguf_metadata_uses_the_files_template_with_vocab_bos_and_eos(tmp_path):
    # Through a real file, so the metadata is what the reader hands over.
    path = gguf.write(
        tmp_path / "m.gguf",
        {
            "general.architecture": "llama",
            "tokenizer.ggml.tokens": VOCAB,
            "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
            "tokenizer.chat_template.tool_use": "tools:{{ tools | length }}",
        },
    )
    metadata = gguf.read(path).metadata
    assert (
        ChatTemplate.from_gguf_metadata(metadata).render([{"role": "user", "content": "x"}])
        == "<s>x</s>"
    )
    named = ChatTemplate.from_gguf_metadata(metadata, name="tool_use")
    assert named.render([], tools=[WEATHER_TOOL]) == "tools:1"


def test_from_gguf_metadata_names_the_templates_a_file_has():
    metadata = {
        "tokenizer.chat_template": "x",
        "tokenizer.chat_template.tool_use": "y",
        "tokenizer.chat_template.rag": "z",
    }
    with pytest.raises(
        ChatTemplateError, match="no chat template named 'vision'; it has: rag, tool_use"
    ):
        ChatTemplate.from_gguf_metadata(metadata, name="vision")


def test_from_gguf_metadata_falls_back_to_the_familys_builtin():
    metadata = {
        "general.architecture": "gemma3",
        "tokenizer.ggml.tokens": ["<pad>", "<eos>", "<bos>", "<start_of_turn>"],
        "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.eos_token_id": 1,
    }
    template = ChatTemplate.from_gguf_metadata(metadata)
    assert template.source == BUILTIN_TEMPLATES["gemma"]
    assert (template.bos_token, template.eos_token) == ("<bos>", "<eos>")


def test_from_gguf_metadata_without_a_vocabulary_has_empty_bos_and_eos():
    template = ChatTemplate.from_gguf_metadata(
        {"tokenizer.chat_template": "{{ bos_token }}|{{ eos_token }}"}
    )
    assert template.render([]) == "|"


@pytest.mark.parametrize(
    ("architecture", "tokens", "expected"),
    [
        ("gemma2", [], "gemma"),
        ("gemma3", [], "gemma"),
        ("qwen2", ["<|im_start|>"], "qwen"),
        ("qwen3", ["<|im_start|>"], "chatml"),
        ("phi3", [], "phi3"),
        ("llama", ["<|begin_of_text|>", "<|start_header_id|>"], "llama3"),
        ("llama", ["<s>", "[INST]", "[/INST]"], "mistral"),
        ("llama", ["<s>", "</s>"], "llama2"),
        ("granite", ["<|im_start|>"], "chatml"),
        ("olmo", ["<|user|>", "<|end|>"], "phi3"),
        ("falcon", ["<|endoftext|>"], "chatml"),
    ],
)
def test_guess_builtin(architecture, tokens, expected):
    assert guess_builtin(architecture, tokens) == expected


# --- what templates are given -----------------------------------------------------------------------


def test_messages_reach_templates_normalised_and_callers_copies_untouched():
    conversation = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {"role": "assistant", "content": None, "tool_calls": []},
        TOOL_CONVERSATION[2],
    ]
    source = "{% for m in messages %}{{ m | tojson }}\n{% endfor %}"
    assert ChatTemplate(source).render(conversation) == (
        '{"role": "user", "content": "one\\ntwo"}\n'
        '{"role": "assistant", "content": ""}\n'
        '{"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function", '
        '"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}\n'
    )
    assert conversation[0]["content"][0] == {"type": "text", "text": "one"}
    assert TOOL_CONVERSATION[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'


def test_non_text_content_parts_are_refused():
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    with pytest.raises(ChatTemplateError, match="message 0 has a content part of type 'image_url'"):
        ChatTemplate.builtin("chatml").render([image])


def test_a_message_without_a_role_is_refused():
    with pytest.raises(ChatTemplateError, match="message 1 is not a chat message"):
        ChatTemplate.builtin("chatml").render([{"role": "user", "content": "a"}, {"content": "b"}])


def test_helpers_real_templates_use():
    source = (
        "{{ strftime_now('%Y') }}|{{ {'b': 1, 'a': 'é'} | tojson }}|{{ [1] | tojson(indent=2) }}|"
        "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
        "{{ i }}{% endfor %}|{% generation %}kept{% endgeneration %}|{{ bos_token }}{{ flavour }}"
    )
    rendered = ChatTemplate(source, bos_token="<s>").render([], bos_token="<b>", flavour="x")
    assert rendered == f'{time.strftime("%Y")}|{{"b": 1, "a": "é"}}|[\n  1\n]|02|kept|<b>x'


def test_compiled_templates_are_shared_by_source():
    assert ChatTemplate("same {{ x }}")._template is ChatTemplate("same {{ x }}")._template


# --- the sandbox ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "attribute"),
    [
        ("{{ ''.__class__.__mro__ }}", "__class__ of a str"),
        ("{{ cycler.__init__.__globals__ }}", "__init__ of a type"),
        ("{{ ''['__class__'] }}", "__class__ of a str"),
        ("{% if messages.__class__ %}x{% endif %}", "__class__ of a list"),
        ("{{ '{0.__class__}'.format('') }}", "__class__ of a str"),
        ("{{ messages.append(1) }}", "append of a list"),
        ("{{ lipsum.__globals__['os'] }}", "__globals__ of a function"),
    ],
)
def test_sandbox_escapes_are_errors(source, attribute):
    with pytest.raises(
        ChatTemplateError, match=f"chat template tried to access unsafe attribute {attribute}"
    ):
        ChatTemplate(source).render([{"role": "user", "content": "x"}])


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% set s = 'x' * 1000000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
        "{{ lipsum(n=100000, html=False, min=1000, max=1001) }}",
    ],
    ids=["nested range", "nested string", "exponential macro", "lipsum"],
)
def test_runaway_templates_stop_at_the_deadline(source):
    # Each runs for minutes or far longer: the error is the deadline stopping it, not its end.
    template = ChatTemplate(source, timeout_s=0.5)
    with pytest.raises(ChatTemplateError, match=r"chat template took longer than 0\.5 s"):
        template.render([])


def test_deadline_gives_back_the_previous_trace_function():
    previous = sys.gettrace()
    with pytest.raises(ChatTemplateError):
        ChatTemplate(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            timeout_s=0.1,
        ).render([])
    assert sys.gettrace() is previous
    assert ChatTemplate("ok").render([]) == "ok"
    assert sys.gettrace() is previous


def test_raise_exception_carries_the_templates_message():
    with pytest.raises(ChatTemplateError, match=r"^chat template raised: x$"):
        ChatTemplate("{{ raise_exception('x') }}").render([])


def test_template_bugs_and_syntax_errors_are_chat_template_errors():
    assert issubclass(ChatTemplateError, TokenizerError)
    with pytest.raises(
        ChatTemplateError,
        match=r'chat template failed: TypeError: can only concatenate str \(not "int"\)',
    ):
        ChatTemplate("{{ 'a' + 1 }}").render([])
    with pytest.raises(ChatTemplateError, match=r"chat template is not valid Jinja \(line 2\): "):
        ChatTemplate("ok\n{% for %}")
    with pytest.raises(ChatTemplateError, match="chat template failed: RecursionError"):
        ChatTemplate("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").render([])


def test_output_is_bounded():
    template = ChatTemplate(
        "{% for i in range(100) %}{{ 'x' * 1000 }}{% endfor %}", max_chars=10_000
    )
    with pytest.raises(
        ChatTemplateError, match=r"^chat template produced more than 10000 characters$"
    ):
        template.render([])


@pytest.mark.parametrize(
    "source",
    [
        "{% macro f(s, n) %}{{ f(s ~ s, n - 1) if n else s }}{% endmacro %}{{ f('x', 40) }}",
        "{% macro f(s, n) %}{{ f(s + s, n - 1) if n else s }}{% endmacro %}{{ f('x', 40) }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    ],
    ids=["~", "+", "namespace"],
)
def test_values_cannot_double_past_the_limit(source):
    with pytest.raises(
        ChatTemplateError,
        match=r"^chat template made a value of 16384 characters; the limit is 10000$",
    ):
        ChatTemplate(source, max_chars=10_000).render([])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ 'x' * 10**10 }}", "chat template's `\\*` would make 10000000000 characters"),
        ("{{ 'x'.center(10**9) }}", "chat template passed the number 1000000000"),
        ("{{ 'x' | center(10**9) }}", "chat template passed the number 1000000000"),
        ("{{ '%999999999d' % 1 }}", "chat template used the format width 999999999"),
        ("{{ '{:>999999999}'.format(1) }}", "chat template used the format width 999999999"),
        ("{{ '%*d' % (999999999, 1) }}", "chat template passed the number 999999999"),
        (
            "{{ range(1000) | join('x' * 100000) }}",
            "chat template's `join` would make 99900000 characters",
        ),
        (
            "{{ ('x' * 100000).join(range(1000) | map('string')) }}",
            "chat template's `join` would make 99902890 characters",
        ),
        (
            "{{ ('x' * 100000) | replace('x', 'yy' * 500) }}",
            "chat template's `replace` would make 100000000 characters",
        ),
        (
            "{{ ('x' * 100000).replace('x', 'yy' * 500) }}",
            "chat template's `replace` would make 100000000 characters",
        ),
        (
            "{{ ('\n' * 100000) | indent(1000) }}",
            "chat template's `indent` would make 100101000 characters",
        ),
        ("{{ 3 ** 100000000 }}", "chat template made a number of about 200000000 bits"),
        ("{{ messages | tojson(indent=1000) }}", "chat template asked for a JSON indent of 1000"),
    ],
)
def test_amplifying_operations_are_refused_before_they_run(source, message):
    with pytest.raises(ChatTemplateError, match=message):
        ChatTemplate(source).render([])


def test_ordinary_numbers_and_text_pass_the_guards():
    source = "{{ 10**12 }} {{ 10000000000 | string }} {{ '%5.2f' % 3.14159 }} {{ 'a-b' | replace('-', '+') }} {{ 'ab' * 3 }}"
    assert ChatTemplate(source).render([]) == "1000000000000 10000000000  3.14 a+b ababab"


def test_builtin_harmony_is_gpt_oss_format():
    """gpt-oss's Harmony turns, as the template of its real files renders them: the system
    turn, the conversation's system prompt and tools in a developer turn, answers in the final
    channel, a tool call to functions.NAME in commentary and its result from functions.NAME."""
    import datetime

    tool = {
        "type": "function",
        "function": {
            "name": "calc",
            "description": "Evaluate an expression",
            "parameters": {
                "type": "object",
                "properties": {
                    "expr": {"type": "string", "description": "the expression"},
                    "digits": {"type": "integer", "default": 3},
                    "mode": {"type": "string", "enum": ["exact", "float"]},
                },
                "required": ["expr"],
            },
        },
    }
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "calc", "arguments": {"expr": "2+2"}}}],
        },
        {"role": "tool", "content": "4"},
        {"role": "assistant", "content": "4."},
    ]
    today = datetime.date.today().strftime("%Y-%m-%d")
    system = (
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        f"Knowledge cutoff: 2024-06\nCurrent date: {today}\n\nReasoning: {{}}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every "
        "message.{}<|end|>"
    )
    template = ChatTemplate.builtin("harmony")
    assert template.render(conversation, tools=[tool], add_generation_prompt=False) == (
        system.format(
            "medium", "\nCalls to these tools must go to the commentary channel: 'functions'."
        )
        + "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\n"
        "namespace functions {\n\n// Evaluate an expression\ntype calc = (_: {\n"
        "// the expression\nexpr: string,\ndigits?: number, // default: 3,\n"
        'mode?: "exact" | "float",\n}) => any;\n\n} // namespace functions<|end|>'
        "<|start|>user<|message|>What is 2+2?<|end|>"
        '<|start|>assistant to=functions.calc<|channel|>commentary json<|message|>{"expr": "2+2"}'
        "<|call|>"
        '<|start|>functions.calc to=assistant<|channel|>commentary<|message|>"4"<|end|>'
        "<|start|>assistant<|channel|>final<|message|>4.<|return|>"
    )
    plain = template.render(conversation[1:2], reasoning_effort="high")
    assert plain == system.format("high", "") + (
        "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant"
    )
    with pytest.raises(ChatTemplateError, match="tool result must follow"):
        template.render([{"role": "user", "content": "x"}, {"role": "tool", "content": "4"}])
    assert guess_builtin("gpt-oss", []) == "harmony"


def test_blocks_nested_past_pythons_limit_are_a_template_error():
    # Jinja compiles to Python, which refuses more than 20 nested blocks with a SyntaxError.
    source = "{% for a in messages %}" * 25 + "x" + "{% endfor %}" * 25
    with pytest.raises(ChatTemplateError, match="nested too deeply"):
        ChatTemplate(source)


def test_a_template_that_is_not_text_is_a_template_error():
    with pytest.raises(ChatTemplateError, match="not text"):
        ChatTemplate.from_gguf_metadata({"tokenizer.chat_template": 5})
    assert "<start_of_turn>" in template_source({"general.architecture": "gemma3"})
