r"""Built-in chat templates, for GGUF files that carry none, and the guess of which one fits a file.

Each renders its family's format as the family's own Hugging Face template does (the tests compare
them, conversation by conversation): chatml `<|im_start|>role\n...<|im_end|>\n`; qwen, chatml with
Qwen2's default system prompt; llama2 `[INST] <<SYS>>...`; llama3 `<|start_header_id|>`; gemma
`<start_of_turn>`, with the system prompt folded into the first user turn; mistral `[INST]...[/INST]`
(Mistral 7B v0.3); phi3 `<|user|>\n...<|end|>\n`; harmony, gpt-oss's
`<|start|>role<|message|>...<|end|>`, as the template its real files carry renders it: a system
turn (identity, knowledge cutoff, date, `Reasoning: medium` unless `reasoning_effort` says
otherwise, the valid channels), the conversation's system prompt and tools in a developer turn,
answers in the `final` channel, tool calls to `functions.NAME` in `commentary`, and a bare
`<|start|>assistant` to generate from.

Tools follow the family where it has a format of its own (llama3: JSON calls and `ipython` results,
Llama 3.1's; mistral: `[AVAILABLE_TOOLS]`, `[TOOL_CALLS]`, `[TOOL_RESULTS]`). The others use the
Hermes format that Qwen 2.5 made common: definitions in the system prompt inside `<tools>`, calls as
`<tool_call>{"name": ..., "arguments": ...}</tool_call>`, results as `<tool_response>` in a user turn.
"""

from __future__ import annotations

from collections.abc import Sequence

# Shared by the templates below: macros, and `system` and `loop_messages` split off the conversation.
# Sources are raw strings: `\n` is Jinja's escape, not Python's.
_PRELUDE = r"""
{%- macro tool_definitions(tools) -%}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" + tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" }}
{%- endmacro %}
{%- macro arguments_json(function) -%}
    {{- function.arguments if function.arguments is string else function.arguments | tojson }}
{%- endmacro %}
{%- macro tool_calls(message) -%}
    {%- for call in message.tool_calls %}
        {%- set function = call.function if call.function is defined else call %}
        {{- ("\n" if not loop.first else "") + '<tool_call>\n{"name": "' + function.name + '", "arguments": ' + arguments_json(function) + '}\n</tool_call>' }}
    {%- endfor %}
{%- endmacro %}
{%- macro tool_response(message, loop, open, close) -%}
    {#- A run of tool results shares one turn. #}
    {{- open if loop.first or loop.previtem.role != "tool" else "\n" }}
    {{- "<tool_response>\n" + message.content + "\n</tool_response>" }}
    {{- close if loop.last or loop.nextitem.role != "tool" else "" }}
{%- endmacro %}
{%- macro unknown_role(family, message) -%}
    {{- raise_exception("the built-in " + family + " template knows the roles system, user, assistant and tool, not " + message.role | tojson) }}
{%- endmacro %}
{%- if messages and messages[0].role == "system" %}
    {%- set system = messages[0].content %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system = none %}
    {%- set loop_messages = messages %}
{%- endif %}
"""


# chatml and qwen differ only in the system prompt used when a conversation brings none.
_CHATML_BODY = r"""
{%- set system = default_system if system is none else system %}
{%- if tools %}
    {{- "<|im_start|>system\n" + (system + "\n\n" if system is not none else "") + tool_definitions(tools) + "<|im_end|>\n" }}
{%- elif system is not none %}
    {{- "<|im_start|>system\n" + system + "<|im_end|>\n" }}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message.role == "tool" %}
        {{- tool_response(message, loop, "<|im_start|>user\n", "<|im_end|>\n") }}
    {%- elif message.role == "assistant" and message.tool_calls %}
        {{- "<|im_start|>assistant\n" + (message.content + "\n" if message.content else "") + tool_calls(message) + "<|im_end|>\n" }}
    {%- elif message.role in ("system", "user", "assistant") %}
        {{- "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n" }}
    {%- else %}
        {{- unknown_role(family, message) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- "<|im_start|>assistant\n" }}
{%- endif %}
"""
_CHATML = _PRELUDE + '{%- set family = "chatml" %}{%- set default_system = none %}' + _CHATML_BODY
_QWEN = (
    _PRELUDE
    + '{%- set family = "qwen" %}{%- set default_system = "You are a helpful assistant." %}'
    + _CHATML_BODY
)


_GEMMA = (
    _PRELUDE
    + r"""
{{- bos_token }}
{%- set first_user_prefix = (system + "\n\n" if system is not none else "") + (tool_definitions(tools) + "\n\n" if tools else "") %}
{%- for message in loop_messages %}
    {%- set prefix = first_user_prefix if loop.first else "" %}
    {%- if message.role == "tool" %}
        {{- tool_response(message, loop, "<start_of_turn>user\n" + prefix, "<end_of_turn>\n") }}
    {%- elif message.role in ("system", "user", "assistant") %}
        {{- "<start_of_turn>" + ("model" if message.role == "assistant" else "user") + "\n" + prefix + message.content | trim }}
        {%- if message.tool_calls %}
            {{- ("\n" if message.content | trim else "") + tool_calls(message) }}
        {%- endif %}
        {{- "<end_of_turn>\n" }}
    {%- else %}
        {{- unknown_role("gemma", message) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- "<start_of_turn>model\n" }}
{%- endif %}
"""
)

_LLAMA2 = (
    _PRELUDE
    + r"""
{%- if tools %}
    {%- set system = (system + "\n\n" if system is not none else "") + tool_definitions(tools) %}
{%- endif %}
{%- for message in loop_messages %}
    {%- set content = message.content %}
    {%- if message.role == "tool" %}
        {%- set content = "<tool_response>\n" + content + "\n</tool_response>" %}
    {%- elif message.tool_calls %}
        {%- set content = (content | trim + "\n" if content | trim else "") + tool_calls(message) %}
    {%- endif %}
    {%- if loop.first and system is not none %}
        {%- set content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content %}
    {%- endif %}
    {%- if message.role in ("system", "user", "tool") %}
        {{- bos_token + "[INST] " + content | trim + " [/INST]" }}
    {%- elif message.role == "assistant" %}
        {{- " " + content | trim + " " + eos_token }}
    {%- else %}
        {{- unknown_role("llama2", message) }}
    {%- endif %}
{%- endfor %}
"""
)

_LLAMA3 = (
    _PRELUDE
    + r"""
{{- bos_token if messages else "" }}
{%- if tools %}
    {{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for tool in tools %}
        {{- tool | tojson(indent=4) + "\n\n" }}
    {%- endfor %}
    {{- (system | trim if system is not none else "") + "<|eot_id|>" }}
{%- elif system is not none %}
    {{- "<|start_header_id|>system<|end_header_id|>\n\n" + system | trim + "<|eot_id|>" }}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message.role == "tool" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" + message.content | trim + "<|eot_id|>" }}
    {%- elif message.role == "assistant" and message.tool_calls %}
        {{- "<|start_header_id|>assistant<|end_header_id|>\n\n" }}
        {%- for call in message.tool_calls %}
            {%- set function = call.function if call.function is defined else call %}
            {{- ("\n" if not loop.first else "") + '{"name": "' + function.name + '", "parameters": ' + arguments_json(function) + "}" }}
        {%- endfor %}
        {{- "<|eot_id|>" }}
    {%- elif message.role in ("system", "user", "assistant") %}
        {{- "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" + message.content | trim + "<|eot_id|>" }}
    {%- else %}
        {{- unknown_role("llama3", message) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- "<|start_header_id|>assistant<|end_header_id|>\n\n" }}
{%- endif %}
"""
)

_MISTRAL = (
    _PRELUDE
    + r"""
{#- The tools and the system prompt go with the last user message, as in Mistral 7B v0.3. #}
{%- set last = namespace(user=-1) %}
{%- for message in loop_messages %}
    {%- if message.role == "user" %}
        {%- set last.user = loop.index0 %}
    {%- endif %}
{%- endfor %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message.role in ("system", "user") %}
        {%- if tools and loop.index0 == last.user %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {{- '{"type": "function", "function": ' + tool.function | tojson + "}" + (", " if not loop.last else "") }}
            {%- endfor %}
            {{- "][/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {{- "[INST] " + (system + "\n\n" if system is not none and loop.index0 == last.user else "") + message.content + "[/INST]" }}
    {%- elif message.role == "assistant" and message.tool_calls %}
        {{- "[TOOL_CALLS] [" }}
        {%- for call in message.tool_calls %}
            {%- set function = call.function if call.function is defined else call %}
            {{- '{"name": ' + function.name | tojson + ', "arguments": ' + arguments_json(function) }}
            {{- (', "id": ' + call.id | tojson if call.id is defined else "") + "}" + (", " if not loop.last else "") }}
        {%- endfor %}
        {{- "]" + eos_token }}
    {%- elif message.role == "assistant" %}
        {{- " " + message.content | trim + eos_token }}
    {%- elif message.role == "tool" %}
        {{- '[TOOL_RESULTS] {"content": ' + message.content }}
        {{- (', "call_id": ' + message.tool_call_id | tojson if message.tool_call_id is defined else "") + "}[/TOOL_RESULTS]" }}
    {%- else %}
        {{- unknown_role("mistral", message) }}
    {%- endif %}
{%- endfor %}
"""
)

_PHI3 = (
    _PRELUDE
    + r"""
{%- if tools %}
    {%- set system = (system + "\n\n" if system else "") + tool_definitions(tools) %}
{%- endif %}
{%- if system %}
    {{- "<|system|>\n" + system + "<|end|>\n" }}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message.role == "tool" %}
        {{- tool_response(message, loop, "<|user|>\n", "<|end|>\n") }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- if message.tool_calls %}
            {%- set content = (content + "\n" if content else "") + tool_calls(message) %}
        {%- endif %}
        {{- "<|assistant|>\n" + content + "<|end|>\n" }}
    {%- elif message.role in ("system", "user") %}
        {{- "<|" + message.role + "|>\n" + message.content + "<|end|>\n" }}
    {%- else %}
        {{- unknown_role("phi3", message) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- "<|assistant|>\n" }}
{%- else %}
    {{- eos_token }}
{%- endif %}
"""
)

# gpt-oss's Harmony format. Tool parameters are rendered as the TypeScript-like signatures the
# model was trained on (one level: nested objects and unions read as `object` and `any`).
_HARMONY = (
    _PRELUDE
    + r"""
{%- macro ts_type(spec) -%}
    {%- if spec.type == "string" and spec.enum -%}
        {{- '"' + spec.enum | join('" | "') + '"' }}
    {%- elif spec.type in ("number", "integer") -%}
        {{- "number" }}
    {%- elif spec.type in ("string", "boolean", "object") -%}
        {{- spec.type }}
    {%- elif spec.type == "array" -%}
        {{- (ts_type(spec["items"]) if spec["items"] is defined else "any") + "[]" }}
    {%- else -%}
        {{- "any" }}
    {%- endif -%}
{%- endmacro %}
{%- set channels = namespace(tool=none) %}
{{- "<|start|>system<|message|>" + (model_identity if model_identity is defined else "You are ChatGPT, a large language model trained by OpenAI.") + "\n" }}
{{- "Knowledge cutoff: 2024-06\nCurrent date: " + strftime_now("%Y-%m-%d") + "\n\n" }}
{{- "Reasoning: " + (reasoning_effort if reasoning_effort is defined else "medium") + "\n\n" }}
{{- "# Valid channels: analysis, commentary, final. Channel must be included for every message." }}
{{- "\nCalls to these tools must go to the commentary channel: 'functions'." if tools else "" }}
{{- "<|end|>" }}
{%- if system is not none or tools %}
    {{- "<|start|>developer<|message|>" }}
    {%- if system is not none %}
        {{- "# Instructions\n\n" + system + "\n\n" }}
    {%- endif %}
    {%- if tools %}
        {{- "# Tools\n\n## functions\n\nnamespace functions {\n\n" }}
        {%- for tool in tools %}
            {%- set function = tool.function if tool.function is defined else tool %}
            {{- "// " + (function.description or "") + "\ntype " + function.name + " = " }}
            {%- set parameters = function.parameters or {} %}
            {%- if parameters.properties %}
                {{- "(_: {\n" }}
                {%- for name, spec in parameters.properties.items() %}
                    {{- ("// " + spec.description + "\n") if spec.description else "" }}
                    {{- name + ("" if name in (parameters.required or []) else "?") + ": " + ts_type(spec) }}
                    {{- (", // default: " + spec.default | tojson) if spec.default is defined else "" }}
                    {{- ",\n" }}
                {%- endfor %}
                {{- "}) => any;\n\n" }}
            {%- else %}
                {{- "() => any;\n\n" }}
            {%- endif %}
        {%- endfor %}
        {{- "} // namespace functions" }}
    {%- endif %}
    {{- "<|end|>" }}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message.role == "user" %}
        {{- "<|start|>user<|message|>" + message.content + "<|end|>" }}
    {%- elif message.role == "assistant" and message.tool_calls %}
        {%- set call = message.tool_calls[0].function if message.tool_calls[0].function is defined else message.tool_calls[0] %}
        {{- "<|start|>assistant to=functions." + call.name + "<|channel|>commentary json<|message|>" }}
        {{- call.arguments if call.arguments is string else call.arguments | tojson }}
        {{- "<|call|>" }}
        {%- set channels.tool = call.name %}
    {%- elif message.role == "assistant" %}
        {#- the last turn of a finished conversation ends the generation; earlier ones a turn #}
        {{- "<|start|>assistant<|channel|>final<|message|>" + message.content }}
        {{- "<|return|>" if loop.last and not add_generation_prompt else "<|end|>" }}
    {%- elif message.role == "tool" %}
        {%- if channels.tool is none %}
            {{- raise_exception("a tool result must follow an assistant message with a tool call") }}
        {%- endif %}
        {{- "<|start|>functions." + channels.tool + " to=assistant<|channel|>commentary<|message|>" + message.content | tojson + "<|end|>" }}
    {%- elif message.role != "system" %}
        {{- unknown_role("harmony", message) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- "<|start|>assistant" }}
{%- endif %}
"""
)

BUILTIN_TEMPLATES: dict[str, str] = {
    "chatml": _CHATML,
    "gemma": _GEMMA,
    "llama2": _LLAMA2,
    "llama3": _LLAMA3,
    "mistral": _MISTRAL,
    "phi3": _PHI3,
    "qwen": _QWEN,
    "harmony": _HARMONY,
}

# Families whose architecture names them outright.
_BY_ARCHITECTURE = {
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "gemma3n": "gemma",
    "qwen": "qwen",
    "qwen2": "qwen",
    "qwen2moe": "qwen",
    "qwen2vl": "qwen",
    "qwen3": "chatml",  # Qwen 3 dropped the default system prompt
    "qwen3moe": "chatml",
    "phi3": "phi3",
    "gpt-oss": "harmony",
}

# For the rest (a `llama` file may be Llama 2, Llama 3 or Mistral), the turn markers the vocabulary
# holds say which format the model learned.
_TURN_MARKERS = (
    ("<|start_header_id|>", "llama3"),
    ("<start_of_turn>", "gemma"),
    ("<|im_start|>", "chatml"),
    ("[INST]", "mistral"),
    ("<|user|>", "phi3"),
)


def guess_builtin(architecture: str, tokens: Sequence[str]) -> str:
    """The built-in template for a model without one of its own. Like llama.cpp, chatml when
    nothing points elsewhere; llama2 for a `llama` vocabulary without turn markers."""
    if architecture in _BY_ARCHITECTURE:
        return _BY_ARCHITECTURE[architecture]
    vocabulary = set(tokens)
    for marker, name in _TURN_MARKERS:
        if marker in vocabulary:
            return name
    return "llama2" if architecture == "llama" else "chatml"
