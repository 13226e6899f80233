"""Chat templates: turn a conversation into the prompt text a model was trained on.

A GGUF file carries its template as Jinja source (`tokenizer.chat_template`), and a GGUF file is
untrusted input. So the template runs in jinja2's immutable sandbox (no attribute that starts with an
underscore, no method that changes a list or dict), under a wall-clock deadline, and every value it
makes is held under a size bound:

- the deadline is a trace function on the rendering thread, so it stops tight loops in the
  template's own code and in the Python it calls alike;
- sizes are checked where a template can make something large out of something small: the
  operators `+ * % **` and `~`, every call and every filter (arguments before, results after; for
  `join`, `replace`, `indent` and `wordwrap`, whose result can be the product of their arguments'
  sizes, an estimate before), and the output as it streams.

Otherwise rendering follows Hugging Face's `apply_chat_template`, the environment these templates are
written for: trim_blocks, lstrip_blocks, loop controls, `raise_exception`, `strftime_now`, and a
`tojson` that keeps key order and non-ASCII text. A file without a template gets a built-in one for
its family (chat_builtin).
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import jinja2
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from llamay.errors import TokenizerError
from llamay.tokenizer.chat_builtin import BUILTIN_TEMPLATES, guess_builtin

DEFAULT_TIMEOUT_S = 2.0
# Far more text than any context window holds, far less memory than any machine has.
DEFAULT_MAX_CHARS = 16 * 1024 * 1024
# A prompt has no use for numbers this large, and one C-level multiplication of them takes seconds.
_MAX_INT_BITS = 1 << 16
_MAX_JSON_INDENT = 64


class ChatTemplateError(TokenizerError):
    """A chat template that cannot be compiled, or that failed, looped or overreached while rendering."""


class ChatTemplate:
    """A compiled chat template and the BOS/EOS token strings it is rendered with."""

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.timeout_s = timeout_s
        self.max_chars = max_chars
        self._template = _compile(source, max_chars)

    @classmethod
    def from_gguf_metadata(
        cls, metadata: Mapping[str, Any], name: str | None = None
    ) -> ChatTemplate:
        """The file's template (`tokenizer.chat_template`, or `tokenizer.chat_template.NAME`), or
        else the built-in template of the model's family."""
        tokens = metadata.get("tokenizer.ggml.tokens", [])
        bos_token = _token_text(metadata, tokens, "tokenizer.ggml.bos_token_id")
        eos_token = _token_text(metadata, tokens, "tokenizer.ggml.eos_token_id")
        if name is not None:
            key = f"tokenizer.chat_template.{name}"
            if key not in metadata:
                prefix = "tokenizer.chat_template."
                named = sorted(k.removeprefix(prefix) for k in metadata if k.startswith(prefix))
                raise ChatTemplateError(
                    f"this model has no chat template named {name!r}; "
                    + (f"it has: {', '.join(named)}" if named else "it has no named templates")
                )
            return cls(_text(metadata[key], key), bos_token=bos_token, eos_token=eos_token)
        return cls(template_source(metadata), bos_token=bos_token, eos_token=eos_token)

    @classmethod
    def builtin(cls, name: str, bos_token: str = "", eos_token: str = "") -> ChatTemplate:
        """One of the built-in templates: chatml, gemma, harmony, llama2, llama3, mistral, phi3,
        qwen."""
        if name not in BUILTIN_TEMPLATES:
            raise ChatTemplateError(
                f"no built-in chat template named {name!r}; "
                f"choose one of: {', '.join(sorted(BUILTIN_TEMPLATES))}"
            )
        return cls(BUILTIN_TEMPLATES[name], bos_token=bos_token, eos_token=eos_token)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """The prompt for `messages` (OpenAI-style dicts). `kwargs` reach the template as variables
        (`enable_thinking=False`, say) and may override `bos_token` and `eos_token`."""
        variables = {
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            **kwargs,
            "messages": _prepare_messages(messages),
            "tools": list(tools) if tools else None,
            "add_generation_prompt": add_generation_prompt,
        }
        chunks: list[str] = []
        length = 0
        try:
            with _deadline(self.timeout_s):
                for chunk in self._template.generate(variables):
                    length += len(chunk)
                    if length > self.max_chars:
                        raise _Abort(
                            f"chat template produced more than {self.max_chars} characters"
                        )
                    chunks.append(chunk)
        except _Abort as abort:
            raise ChatTemplateError(str(abort)) from None
        except Exception as error:
            raise ChatTemplateError(
                f"chat template failed: {type(error).__name__}: {error}"
            ) from None
        return "".join(chunks)


# --- the messages a template sees ----------------------------------------------------------------


def _prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `messages` in the shape templates expect: content as one string, tool-call
    arguments as dicts (the Hugging Face convention) where OpenAI clients send JSON text."""
    prepared = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ChatTemplateError(
                f"message {index} is not a chat message: it needs a 'role' string"
            )
        copy = dict(message)
        copy["content"] = _content_text(message.get("content"), index)
        # Templates test `'tool_calls' in message` or `message.tool_calls is defined`: a null or
        # empty list from a client must read as no tool calls.
        if message.get("tool_calls"):
            copy["tool_calls"] = [_prepare_tool_call(call) for call in message["tool_calls"]]
        else:
            copy.pop("tool_calls", None)
        prepared.append(copy)
    return prepared


def _content_text(content: Any, index: int) -> str:
    if content is None:  # an assistant turn that only calls tools
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ChatTemplateError(
            f"message {index} has content of type {type(content).__name__}; "
            "expected a string or a list of text parts"
        )
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
        if kind != "text" or not isinstance(part.get("text"), str):
            raise ChatTemplateError(
                f"message {index} has a content part of type {kind!r}; llamay's models read text parts only"
            )
        texts.append(part["text"])
    return "\n".join(texts)  # as llama.cpp joins text parts


def _prepare_tool_call(call: Any) -> Any:
    if not isinstance(call, Mapping):
        return call
    copy = dict(call)
    if isinstance(call.get("function"), Mapping):
        copy["function"] = _with_parsed_arguments(call["function"])
        return copy
    return _with_parsed_arguments(copy)


def _with_parsed_arguments(function: Mapping[str, Any]) -> dict[str, Any]:
    copy = dict(function)
    arguments = copy.get("arguments")
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return copy  # not JSON (or absurdly nested): the template gets the text as it came
        if isinstance(parsed, dict):
            copy["arguments"] = parsed
    return copy


def template_source(metadata: Mapping[str, Any]) -> str:
    """The text of the template `from_gguf_metadata` compiles: the file's own, or else the
    built-in one of the model's family. For showing it: this compiles nothing."""
    source = metadata.get("tokenizer.chat_template")
    if source:
        return _text(source, "tokenizer.chat_template")
    tokens = metadata.get("tokenizer.ggml.tokens", [])
    architecture = metadata.get("general.architecture", "")
    family = guess_builtin(
        architecture if isinstance(architecture, str) else "",
        [t for t in tokens if isinstance(t, str)] if isinstance(tokens, (list, tuple)) else [],
    )
    return BUILTIN_TEMPLATES[family]


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ChatTemplateError(f"the model's {key} is not text but {type(value).__name__}")
    return value


def _token_text(metadata: Mapping[str, Any], tokens: Sequence[str], key: str) -> str:
    token_id = metadata.get(key)
    try:
        index = int(token_id)
    except (TypeError, ValueError, OverflowError):  # absent, or not a number: a hostile file
        return ""
    if not 0 <= index < len(tokens) or not isinstance(tokens[index], str):
        return ""
    return tokens[index]


# --- the sandbox ------------------------------------------------------------------------------------


class _Abort(BaseException):
    """Stops a render with a message for the user. A BaseException, so that no `except Exception`
    on the way out of the template (jinja's own included) can swallow it."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    end = time.monotonic() + seconds

    def on_line(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > end:
            raise _Abort(f"chat template took longer than {seconds:g} s")
        return on_line

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > end:
            raise _Abort(f"chat template took longer than {seconds:g} s")
        # Line events only in the template's own code, where its loops run: tracing every line of
        # jinja and the standard library would slow each render for nothing.
        return on_line if frame.f_code.co_filename == "<template>" else None

    previous = sys.gettrace()  # a debugger's or coverage's, given back afterwards
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)


def _raise_exception(message: str) -> None:
    raise _Abort(f"chat template raised: {message}")


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson sorts keys and escapes HTML; templates are written for Hugging Face's, which
    # does neither. An indent is work per nesting level, so it is kept to what a prompt could want.
    width = indent if isinstance(indent, int) else len(indent or "")
    if width > _MAX_JSON_INDENT:
        raise _Abort(
            f"chat template asked for a JSON indent of {width}; the limit is {_MAX_JSON_INDENT}"
        )
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _GenerationBlock(Extension):
    """`{% generation %}...{% endgeneration %}`: Hugging Face marks the assistant's text with it for
    training masks; a prompt only needs the text inside."""

    tags = {"generation"}  # noqa: RUF012 (jinja's declared type)

    def parse(self, parser: Any) -> Any:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles `a ~ b` so that its result is size-checked like the other operators'."""

    def visit_Concat(self, node: Any, frame: Any) -> None:
        self.write("environment.bounded(")
        super().visit_Concat(node, frame)
        self.write(")")


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with Hugging Face's helpers, in which no value grows past
    `max_chars` and reaching for an unsafe attribute is an error rather than an empty string."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "*", "%", "**"})

    def __init__(self, max_chars: int) -> None:
        super().__init__(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _GenerationBlock]
        )
        self.max_chars = max_chars
        self.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        self.filters["tojson"] = _tojson
        self.filters = {name: self._bounded_filter(name, f) for name, f in self.filters.items()}

    def bounded(self, value: Any) -> Any:
        size = len(value) if isinstance(value, Sized) else 0
        if size > self.max_chars:
            raise _Abort(
                f"chat template made a value of {size} characters; the limit is {self.max_chars}"
            )
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise _Abort(f"chat template made a number of {value.bit_length()} bits")
        return value

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        # Jinja would hand back an Undefined that prints as "": an attempt to escape would pass
        # unnoticed. It is refused on the spot instead.
        raise _Abort(
            f"chat template tried to access unsafe attribute {attribute} of a {type(obj).__name__}"
        )

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            self._check_repeat(left, right)
        elif operator == "**":
            self._check_power(left, right)
        elif operator == "%" and isinstance(left, str):
            self._check_format(left)
            self._check_arguments(right if isinstance(right, tuple) else (right,))
        return self.bounded(super().call_binop(context, operator, left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # (Double underscores, as in jinja's own `call`, so that no keyword a template passes can
        # collide with these parameters.)
        __self._check_arguments(args, kwargs)
        method = getattr(__obj, "__wrapped__", __obj)  # the sandbox hands out str.format wrapped
        text = getattr(method, "__self__", None)
        if isinstance(text, str):
            name = getattr(method, "__name__", "")
            if name in ("format", "format_map"):
                __self._check_format(text)
            elif name == "join" and args:
                items = _sized(args[0])
                __self._check_estimate("join", _join_size(items, text))
                args = (items, *args[1:])
            elif name == "replace" and len(args) >= 2:
                __self._check_estimate("replace", _replace_size(text, *args[:3]))
        return __self.bounded(super().call(__context, __obj, *args, **kwargs))

    def _bounded_filter(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        # functools.wraps copies jinja's pass_context/pass_eval_context marks along with the name.
        @functools.wraps(function)
        def bounded_filter(*args: Any, **kwargs: Any) -> Any:
            # Jinja passes some filters a context first; then comes the value, then the parameters.
            value_index = 0 if getattr(function, "jinja_pass_arg", None) is None else 1
            self._check_arguments(args[value_index + 1 :], kwargs)
            if name == "format" and isinstance(args[0], str):
                self._check_format(args[0])
            if name in _PRODUCT_FILTERS:
                args, kwargs = self._check_product_filter(name, function, args, kwargs)
            return self.bounded(function(*args, **kwargs))

        return bounded_filter

    def _check_product_filter(
        self, name: str, function: Callable[..., Any], args: tuple, kwargs: dict[str, Any]
    ) -> tuple[tuple, dict[str, Any]]:
        try:
            bound = inspect.signature(function).bind(*args, **kwargs)
        except TypeError:
            return args, kwargs  # the filter itself will say what is wrong with its arguments
        bound.apply_defaults()
        if name == "join":  # counted, so a generator must become a list the filter then joins
            bound.arguments["value"] = _sized(bound.arguments["value"])
        self._check_estimate(name, _PRODUCT_FILTERS[name](bound.arguments))
        return bound.args, bound.kwargs

    def _check_arguments(
        self, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
    ) -> None:
        # Every width, count and repeat a template passes is a number: one bound on them all keeps
        # `center`, `ljust`, `zfill`, `'%*d'` and their kind from making huge strings in one step.
        for value in (*args, *(kwargs or {}).values()):
            if isinstance(value, int) and abs(value) > self.max_chars:
                raise _Abort(
                    f"chat template passed the number {value}; the limit is {self.max_chars}"
                )

    def _check_format(self, format_string: str) -> None:
        # Widths and precisions written into a format string ('%99999999d', '{:>99999999}').
        for width in _format_widths(format_string):
            if len(width) > 18 or int(width) > self.max_chars:
                raise _Abort(
                    f"chat template used the format width {width}; the limit is {self.max_chars}"
                )

    def _check_repeat(self, left: Any, right: Any) -> None:
        if isinstance(left, int) and isinstance(right, int):
            self._check_power_bits(left.bit_length() + right.bit_length())
            return
        count, sequence = (left, right) if isinstance(left, int) else (right, left)
        if isinstance(count, int) and isinstance(sequence, Sized):
            self._check_estimate("*", len(sequence) * count)

    def _check_power(self, base: Any, exponent: Any) -> None:
        if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
            self._check_power_bits(base.bit_length() * exponent)

    def _check_power_bits(self, bits: int) -> None:
        if bits > _MAX_INT_BITS:
            raise _Abort(f"chat template made a number of about {bits} bits")

    def _check_estimate(self, operation: str, size: int) -> None:
        if size > self.max_chars:
            raise _Abort(
                f"chat template's `{operation}` would make {size} characters; the limit is {self.max_chars}"
            )


_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*)(?:\.(\d*))?")
_FORMAT_SPEC = re.compile(r"\{[^{}]*?:([^{}]*)\}")
_DIGITS = re.compile(r"\d+")


def _format_widths(format_string: str) -> list[str]:
    widths = [n for match in _PRINTF_SPEC.findall(format_string) for n in match if n]
    for spec in _FORMAT_SPEC.findall(format_string):
        widths += _DIGITS.findall(spec)
    return widths


def _sized(items: Any) -> Any:
    return items if isinstance(items, Sized) else list(items)


def _join_size(items: Any, separator: Any) -> int:
    if not isinstance(items, Sized):
        return 0
    parts = sum(len(item) for item in items if isinstance(item, Sized))
    return parts + len(str(separator)) * max(len(items) - 1, 0)


def _replace_size(text: Any, old: Any, new: Any, count: Any = None) -> int:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return 0
    hits = text.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * max(len(new) - len(old), 0)


def _indent_size(text: Any, width: Any) -> int:
    text = str(text)
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    return len(text) + (text.count("\n") + 1) * pad


def _wordwrap_size(text: Any, width: Any, wrapstring: Any) -> int:
    text = str(text)
    lines = len(text) // max(width if isinstance(width, int) else 1, 1) + text.count("\n") + 1
    return len(text) + lines * len(str(wrapstring or "\n"))


# The filters whose result can be the product of their arguments' sizes, by jinja's parameter names.
_PRODUCT_FILTERS: dict[str, Callable[[Mapping[str, Any]], int]] = {
    "join": lambda a: _join_size(a["value"], a["d"]),
    "replace": lambda a: _replace_size(a["s"], a["old"], a["new"], a["count"]),
    "indent": lambda a: _indent_size(a["s"], a["width"]),
    "wordwrap": lambda a: _wordwrap_size(a["s"], a["width"], a["wrapstring"]),
}


@functools.lru_cache(maxsize=8)
def _environment(max_chars: int) -> _BoundedSandbox:
    return _BoundedSandbox(max_chars)


@functools.lru_cache(maxsize=64)
def _compile(source: str, max_chars: int) -> jinja2.Template:
    try:
        return _environment(max_chars).from_string(source)
    except jinja2.TemplateSyntaxError as error:
        raise ChatTemplateError(
            f"chat template is not valid Jinja (line {error.lineno}): {error.message}"
        ) from None
    except (RecursionError, SyntaxError):
        # Jinja compiles to Python: blocks nested past Python's limit of 20 ("too many
        # statically nested blocks") or expressions past the parser's depth fail there.
        raise ChatTemplateError("chat template is nested too deeply to compile") from None
    except _Abort as abort:  # jinja folds constant expressions while compiling: the guards run then
        raise ChatTemplateError(str(abort)) from None
