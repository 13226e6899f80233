"""The one place where a request becomes generations, for every API family.

A family route reads its own request shape and calls, in order:

1. `chat_prompt(model, messages, tools=...)` (or `text_prompt`) -> prompt token ids;
2. `sampling_kwargs(...)` -> the keyword arguments of `model.generate`, checked;
   `json_grammar(...)` / `tool_grammar(...)` -> the grammar that enforces an output format;
3. `start(model, prompt, n, kwargs)` -> one Generation per choice, each begun (`started`);
4. `interleave(generations)` -> (choice index, Piece) in the order they are made, for streaming
   or collecting; `Outcome.of(...)` -> what each choice ended with.

Tool calls follow the template's own convention (toolcalls.py: Hermes `<tool_call>`, Llama 3
JSON, Mistral `[TOOL_CALLS]`, Harmony, or bare JSON for templates that know no tools, whose
definitions then go into the system message). Under "auto" the answer is free until the
format's opening marker, then held to calls by a lazy grammar. `answer(...)` reads a
generation's pieces into text, reasoning and calls (answer.py), the same for every family.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llamay.engine import Model, ranges
from llamay.engine.generate import chat_prompt_ids
from llamay.engine.sampling import log_probabilities
from llamay.errors import ContextOverflow
from llamay.grammar import Grammar
from llamay.server.answer import THINK, Answer, opens_thinking, reasoning_of
from llamay.server.ending import stop
from llamay.server.errors import ApiError
from llamay.server.toolcalls import MISTRAL, call_grammar, format_of, function_of

# The most choices one request may ask for (each one is a sequence in the batch).
MAX_CHOICES = int(ranges.RANGES["n"].high)
MAX_STOP_STRINGS = 16
MAX_TOP_LOGPROBS = int(ranges.RANGES["logprobs"].high)

_TOOL_INSTRUCTIONS = (
    "You can call these tools (JSON schemas of their arguments):\n{tools}\n\n"
    "To call a tool, answer with only a JSON object of the form "
    '{{"name": "<tool name>", "arguments": {{...}}}} and nothing else. '
    "Otherwise answer normally."
)

# --- prompts -----------------------------------------------------------------------------------


def chat_prompt(
    model: Model,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    truncate: bool = False,
    reserve: int = 1,
    template_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """Prompt ids of a conversation (OpenAI-shaped messages: role, content as a string or text
    parts, tool_calls, tool_call_id) through the model's chat template, ready for the assistant
    (`render_chat` says how). See `fit` for `truncate` and `reserve`.
    """
    rendered = render_chat(model, messages, tools=tools, template_kwargs=template_kwargs)
    rendered = bounded_text(model, rendered, truncate=truncate)
    return fit(model, chat_prompt_ids(model, rendered), truncate=truncate, reserve=reserve)


def render_chat(
    model: Model,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """A conversation as the model's chat template writes it, ready for the assistant's turn.

    A trailing assistant message is continued (prefill): the answer goes on from its text.
    `tools` (OpenAI function tools) are rendered by the template when it takes them, else into
    the system message. System messages anywhere in the list are gathered into one at the top,
    as every template expects. `template_kwargs` reach the template as variables
    (`enable_thinking`, `reasoning_effort`).
    """
    if not messages:
        raise ApiError(400, "messages must not be empty", "messages")
    if not all(isinstance(m, Mapping) for m in messages):
        raise ApiError(400, "each message must be an object with a role and content", "messages")
    # OpenAI's newer name for the system role; templates know only "system".
    messages = [
        {**m, "role": "system"} if m.get("role") == "developer" else dict(m) for m in messages
    ]
    prefill = None
    if messages[-1].get("role") == "assistant" and not messages[-1].get("tool_calls"):
        prefill = text_of(messages.pop().get("content"))
    template = model.chat_template
    fmt = format_of(template.source)
    native_tools = fmt.native
    if fmt is MISTRAL:
        messages = _mistral_ids(messages)
    if not native_tools:
        messages = _plain_conversation(messages, tools)
    system = [m for m in messages if m.get("role") == "system"]
    if len(system) > 1 or (system and messages[0].get("role") != "system"):
        joined = "\n\n".join(text_of(m.get("content")) for m in system)
        messages = [{"role": "system", "content": joined}] + [
            m for m in messages if m.get("role") != "system"
        ]
    rendered = template.render(
        messages,
        tools=list(tools) if tools and native_tools else None,
        **dict(template_kwargs or {}),
    )
    return rendered + (prefill or "")


def prefill_of(messages: Sequence[Any]) -> str:
    """The text a conversation's answer continues: a trailing assistant message without tool
    calls, which chat_prompt leaves open (prefill)."""
    if messages and isinstance(messages[-1], Mapping):
        last = messages[-1]
        if last.get("role") == "assistant" and not last.get("tool_calls"):
            return text_of(last.get("content"))
    return ""


def text_prompt(model: Model, text: str, *, truncate: bool = False, reserve: int = 1) -> list[int]:
    """Prompt ids of raw text (no template): BOS where the model asks for it, specials parsed."""
    if not text:
        raise ApiError(400, "the prompt is empty: there is nothing to continue", "prompt")
    text = bounded_text(model, text, truncate=truncate)
    return fit(model, model.tokenize(text), truncate=truncate, reserve=reserve)


def bounded_text(model: Model, text: str, *, truncate: bool) -> str:
    """`text`, unless it is certainly more tokens than a context holds, which is known from its
    length alone (no token stands for more than max_token_chars characters): then 400
    (ContextOverflow) before a 30 MB text is tokenized only to be refused, or with `truncate`
    its end, enough characters for the most tokens a context holds, and more."""
    limit = (model.n_ctx + 1) * model.tokenizer.max_token_chars
    if len(text) <= limit:
        return text
    if not truncate:
        raise ContextOverflow(
            f"the prompt is {len(text)} characters, so at least "
            f"{len(text) // model.tokenizer.max_token_chars} tokens, but the context holds "
            f"{model.n_ctx}; shorten it or ask for truncation"
        )
    return text[-limit:]


def fit(model: Model, ids: list[int], *, truncate: bool, reserve: int) -> list[int]:
    """The prompt, if it leaves room to generate at least one token (a generation that fills
    the context ends with "length"). Otherwise 400 (ContextOverflow), or with `truncate` its
    first token (BOS) and its most recent tokens, leaving `reserve` tokens (at most half the
    context) to generate into."""
    if len(ids) < model.n_ctx:
        return ids
    if not truncate:
        raise ContextOverflow(
            f"the prompt is {len(ids)} tokens but the context holds {model.n_ctx}; "
            "shorten it or ask for truncation"
        )
    keep = model.n_ctx - min(max(1, reserve), model.n_ctx // 2)
    return ids[:1] + ids[len(ids) - keep + 1 :]


def _plain_conversation(
    messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """For a template without tool support: the tool definitions in the system message, tool
    calls as the JSON the model would write, tool results as user turns; then consecutive
    turns of one role merged, as templates that check alternation require."""
    plain: list[dict[str, Any]] = []
    if tools:
        listing = json.dumps([function_of(tool) for tool in tools], ensure_ascii=False)
        plain.append({"role": "system", "content": _TOOL_INSTRUCTIONS.format(tools=listing)})
    for message in messages:
        role = message.get("role")
        if role == "tool":
            name = message.get("name") or message.get("tool_call_id") or "tool"
            text = f"Result of {name}: {text_of(message.get('content'))}"
            plain.append({"role": "user", "content": text})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [_call_text(call) for call in message["tool_calls"]]
            text = "\n".join(filter(None, [text_of(message.get("content")), *calls]))
            plain.append({"role": "assistant", "content": text})
        else:
            plain.append({**message, "content": text_of(message.get("content"))})
    merged: list[dict[str, Any]] = []
    for message in plain:
        if merged and merged[-1]["role"] == message["role"] != "system":
            merged[-1] = {
                **merged[-1],
                "content": merged[-1]["content"] + "\n\n" + message["content"],
            }
        else:
            merged.append(message)
    return merged


def _mistral_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mistral's template refuses call ids that are not 9 alphanumeric characters, and OpenAI
    clients send `call_...`: each id becomes 9 characters of its digest, the same in the call
    and in the result that answers it."""

    def short(value: Any) -> Any:
        if not isinstance(value, str) or (len(value) == 9 and value.isalnum()):
            return value
        return hashlib.sha256(value.encode()).hexdigest()[:9]

    fixed = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "id": short(call.get("id"))} if isinstance(call, Mapping) else call
                for call in message["tool_calls"]
            ]
        if "tool_call_id" in message:
            message["tool_call_id"] = short(message["tool_call_id"])
        fixed.append(message)
    return fixed


def _call_text(call: Mapping[str, Any]) -> str:
    function = call.get("function", call)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)


def text_of(content: Any, where: str = "content") -> str:
    """Message content given as a string or as text parts (OpenAI) or blocks (Anthropic), as
    one string; 400 naming `where` for any other kind of part."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise ApiError(
                    400, f"{where}: parts of type {kind!r} are not supported here; send text"
                )
            texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    raise ApiError(400, f"{where}: content must be a string or a list of parts, not {content!r}")


# --- options -----------------------------------------------------------------------------------


def sampling_kwargs(
    model: Model,
    *,
    max_tokens: Any = None,
    temperature: Any = None,
    top_p: Any = None,
    top_k: Any = None,
    min_p: Any = None,
    typical_p: Any = None,
    repeat_penalty: Any = None,
    repeat_last_n: Any = None,
    presence_penalty: Any = None,
    frequency_penalty: Any = None,
    logit_bias: Any = None,
    seed: Any = None,
    stop: Any = None,
    logprobs: Any = None,
    grammar: Any = None,
    lookup: Any = None,
) -> dict[str, Any]:
    """The keyword arguments of `model.generate` for a request's options, each checked (400
    naming the option when it is out of range); None means the engine's default.
    `logit_bias` maps token ids (ints or their strings, as JSON keys are) to a bias; -100 or
    less bans the token. `stop` is a string or a list of them."""
    kwargs: dict[str, Any] = {}
    given = {
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "min_p": min_p,
        "typical_p": typical_p,
        "repeat_penalty": repeat_penalty,
        "repeat_last_n": repeat_last_n,
        "presence_penalty": presence_penalty,
        "frequency_penalty": frequency_penalty,
        "logprobs": logprobs,
        "seed": seed,
        "lookup": lookup,
    }
    for name, value in given.items():
        if value is not None:
            kwargs[name] = checked(name, value)
    if stop is not None:
        kwargs["stop"] = _stop_strings(stop)
    if logit_bias:
        kwargs["logit_bias"] = _logit_bias(model, logit_bias)
    if grammar is not None:
        kwargs["grammar"] = grammar
    return kwargs


def request_sampling(model: Model, body: Mapping[str, Any], **given: Any) -> dict[str, Any]:
    """sampling_kwargs for a request body that names its sampling parameters as the engine
    does (ranges.SAMPLING: temperature, top_p, ..., seed), with `stop` and `logit_bias`;
    `given` (max_tokens, logprobs, grammar, or a parameter read under another name) wins."""
    named = {name: body.get(name) for name in ranges.SAMPLING}
    named.update(stop=body.get("stop"), logit_bias=body.get("logit_bias"))
    return sampling_kwargs(model, **{**named, **given})


def checked(name: str, value: Any) -> int | float:
    """A request's value for generation parameter `name`, checked against the range table the
    engine uses too (400 naming the parameter when it is out of range)."""
    try:
        return ranges.check(name, value)
    except ValueError as error:
        raise ApiError(400, str(error), name) from None


def _stop_strings(stop: Any) -> list[str]:
    strings = [stop] if isinstance(stop, str) else stop
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise ApiError(400, "stop must be a string or a list of strings", "stop")
    if len(strings) > MAX_STOP_STRINGS:
        raise ApiError(400, f"at most {MAX_STOP_STRINGS} stop strings", "stop")
    return [s for s in strings if s]


def _logit_bias(model: Model, bias: Any) -> dict[int, float]:
    if not isinstance(bias, Mapping):
        raise ApiError(400, "logit_bias must map token ids to numbers", "logit_bias")
    result = {}
    for key, value in bias.items():
        try:
            token = int(key)
        except ValueError:
            raise ApiError(400, f"logit_bias key {key!r} is not a token id", "logit_bias") from None
        if not 0 <= token < model.n_vocab:
            raise ApiError(
                400, f"logit_bias names token {token}, not in the vocabulary", "logit_bias"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not -100 <= value <= 100
        ):
            raise ApiError(
                400,
                f"logit_bias values must be numbers from -100 to 100, not {value!r}",
                "logit_bias",
            )
        result[token] = -math.inf if value <= -100 else float(value)
    return result


# --- output formats ------------------------------------------------------------------------------


def json_grammar(kind: str, schema: Mapping[str, Any] | None = None) -> Grammar | None:
    """The grammar of a JSON output format: "json_object" (any object) or "json_schema" (an
    instance of `schema`); None for "text". GrammarError (400) for a schema it cannot enforce."""
    if kind == "text":
        return None
    if kind == "json_object":
        return Grammar.json_object()
    if kind == "json_schema":
        if not isinstance(schema, Mapping):
            raise ApiError(400, "json_schema needs a 'schema' object", "response_format")
        return Grammar.from_json_schema(dict(schema))
    raise ApiError(400, f"unknown response format {kind!r}", "response_format")


def tool_grammar(
    model: Model,
    tools: Sequence[Mapping[str, Any]],
    choice: str | None,
    name: str | None = None,
    *,
    parallel: bool = True,
    prefill: str = "",
) -> Any:
    """The grammar for tool_choice `choice` ("auto", "none", "required", or "named" with
    `name`) in the model's call format (toolcalls.call_grammar): None for "none"; a lazy
    grammar triggered by the opening marker for "auto"; calls from the first token for
    "required" (any tool) and "named" (that tool)."""
    if tools is None or choice is None:
        return None
    return call_grammar(
        format_of(model.chat_template.source),
        tools,
        choice,
        name,
        parallel=parallel,
        prefix=prefill,
    )


def answer(
    model: Model,
    prompt: Sequence[int],
    tools: Sequence[Mapping[str, Any]] | None = None,
    prefill: str = "",
    *,
    reasoning: bool = True,
) -> Answer:
    """A reader of the answer to a chat prompt (answer.py): its reasoning split off where the
    template reasons (unless `reasoning` is False), its calls read in the template's format
    when `tools` are offered; `prefill` is the text the answer continues."""
    source = model.chat_template.source
    kind = reasoning_of(source) if reasoning else None
    if prefill:  # the prompt ends with the prefill: is it inside <think>?
        inside = kind == THINK and prefill.rfind("<think>") > prefill.rfind("</think>")
    else:
        inside = kind == THINK and opens_thinking(
            model.tokenizer.detokenize(list(prompt[-4:]), special=True)
        )
    fmt = format_of(source) if tools else None
    return Answer(model.tokenizer, tools or None, fmt, kind, inside, prefill)


# --- running -------------------------------------------------------------------------------------


def check_n(n: Any) -> int:
    """`n` (choices per prompt), checked against the range table; null means 1, as OpenAI's
    spec says."""
    if n is None:
        return int(ranges.RANGES["n"].default or 1)
    return int(checked("n", n))


def start(
    model: Model,
    prompt: list[int],
    n: int,
    kwargs: Mapping[str, Any],
    context: Any = None,
) -> list[Any]:
    """`n` generations of the same prompt (400 past MAX_CHOICES), each in a new context, or
    the one generation of `prompt` after the tokens of the caller's `context`. With a seed,
    choice i uses seed + i, so the choices differ from each other and repeat from run to
    run."""
    n = check_n(n)
    if context is not None and n != 1:
        raise ValueError("a caller's context holds one choice")
    generations: list[Any] = []
    try:
        for index in range(n):
            seed = kwargs.get("seed")
            choice_kwargs = {**kwargs, "seed": None if seed is None else seed + index}
            generations.append(model.generate(prompt, context=context, **choice_kwargs))
        started(generations)
    except BaseException:
        release(generations)
        raise
    return generations


def started(generations: Sequence[Any]) -> None:
    """Waits until each generation has its first result, and raises the error of one that
    failed before its first token (no room in the KV cache: a 503): before the answer's
    status is sent, so that a stream does not begin with 200 only to fail."""
    for generation in generations:
        generation.started()
    for generation in generations:
        if generation.error is not None and not generation.tokens:
            raise generation.error


def interleave(generations: Sequence[Any]) -> Iterator[tuple[int, Any]]:
    """(index, Piece) of every generation, one step of each in turn, so that they advance
    together in the scheduler's batches. When the iterator ends or is closed, the generations
    are released (`release`)."""
    streams = [(index, generation.pieces()) for index, generation in enumerate(generations)]
    try:
        while streams:
            for entry in list(streams):
                index, pieces = entry
                piece = next(pieces, None)
                if piece is None:
                    streams.remove(entry)
                else:
                    yield index, piece
    finally:
        release(generations)


def release(generations: Iterable[Any]) -> None:
    """Give the pages of generations back to the pool: a finished generation's context is
    closed, one still running is cancelled (the scheduler closes it within a step). A context
    the caller passed stays open, and is the caller's again once this returns (ending.stop).
    Safe to call more than once: a stream calls it when the client goes away before it
    began."""
    generations = list(generations)
    cancel(generations)
    for generation in generations:
        if not generation.owns_context:
            stop(generation)
        elif generation.finish_reason is not None:
            generation.context.close()


def cancel(generations: Iterable[Any]) -> None:
    """Cancel generations that have not finished; a context the generation made is closed by
    the scheduler within a step, one the caller passed stays the caller's."""
    for generation in generations:
        if generation.finish_reason is None:
            generation.cancel()


@dataclass
class Outcome:
    """What one choice ended with: finish_reason ("stop", "length", "cancelled"), the stop
    string that ended it (None if another reason did) and its token counts."""

    finish_reason: str
    stop_sequence: str | None
    n_prompt: int
    n_generated: int

    @classmethod
    def of(cls, model: Model, generation: Any, stop: Sequence[str] = ()) -> Outcome:
        matched = None
        if generation.finish_reason == "stop" and stop:
            # The stop string is never emitted: it is what the tokens say beyond the text.
            tail = model.detokenize(generation.tokens)[len(generation.text) :]
            matched = next((s for s in stop if tail.startswith(s)), None)
        return cls(generation.finish_reason, matched, generation.n_prompt, generation.n_generated)


class Unsampled:
    """A choice that generates nothing (max_tokens 0; with echo, the prompt is only scored), in
    the shape of a finished Generation."""

    finish_reason = "length"
    error = None
    text = ""
    owns_context = True

    def __init__(self, n_prompt: int) -> None:
        self.n_prompt = n_prompt
        self.tokens: list[int] = []
        self.n_generated = 0
        self.timings = {"prompt_s": 0.0, "generate_s": 0.0}
        self.context = _NoContext()

    def started(self) -> bool:
        return True

    def pieces(self) -> Iterator[Any]:
        return iter(())

    def cancel(self) -> None:
        pass


class _NoContext:
    def close(self) -> None:
        pass


# Prompt rows are scored this many at a time: all_logits holds (rows, n_vocab) float32.
_SCORE_CHUNK = 64


def prompt_logprobs(
    model: Model, ids: Sequence[int], n_top: int
) -> list[tuple[float | None, list[tuple[int, float]] | None]]:
    """(log p(token | the tokens before it), its n_top most likely alternatives) for every
    prompt token, the first (None, None): OpenAI's echoed logprobs, which lm-evaluation-harness
    sums to score a continuation. The prompt is fed in a fresh context (`Context.feed` with
    all_logits), so the figures are the ones that call gives."""
    scored: list[tuple[float | None, list[tuple[int, float]] | None]] = [(None, None)]
    context = model.context()
    try:
        for start in range(0, len(ids), _SCORE_CHUNK):
            rows = context.feed(list(ids[start : start + _SCORE_CHUNK]), all_logits=True)
            for offset, row in enumerate(rows):
                position = start + offset + 1
                if position < len(ids):
                    scored.append(log_probabilities(row, ids[position], n_top))
    finally:
        context.close()
    return scored


def token_text(model: Model, token: int) -> str:
    """The text of one token on its own (for logprobs)."""
    return model.detokenize([token])
