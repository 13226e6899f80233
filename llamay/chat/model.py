"""`Model`: the engine's model with a conversation on top (what `llamay.load` returns).

`Model.chat` takes a conversation as OpenAI's chat API writes it and answers it the way the
server does, step for step: the messages through the chat template (prompt.py), the tools'
calls or the response format held by a grammar (read by spellings.py, as the server reads
them; constraints.py), the generation read into
text, reasoning and tool calls (answer.py). So the same request with the same seed (or greedy)
gives the same tokens here as through `llamay serve`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

from llamay import engine
from llamay.chat.answer import answer_reader
from llamay.chat.constraints import tool_grammar
from llamay.chat.prompt import chat_prompt, prefill_of
from llamay.chat.reply import ChatResult, ChatStream
from llamay.chat.spellings import read_choice, read_format, read_tools


class Model(engine.Model):
    """A loaded model: tokenize, contexts, `generate` (llamay.engine.Model), and `chat`."""

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = ...,
        tool_choice: str | Mapping[str, Any] | None = ...,
        response_format: Mapping[str, Any] | None = ...,
        stream: Literal[False] = ...,
        parallel_tool_calls: bool = ...,
        template_kwargs: Mapping[str, Any] | None = ...,
        **sampling: Any,
    ) -> ChatResult: ...

    @overload
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = ...,
        tool_choice: str | Mapping[str, Any] | None = ...,
        response_format: Mapping[str, Any] | None = ...,
        stream: Literal[True],
        parallel_tool_calls: bool = ...,
        template_kwargs: Mapping[str, Any] | None = ...,
        **sampling: Any,
    ) -> ChatStream: ...

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        stream: bool = False,
        parallel_tool_calls: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
        **sampling: Any,
    ) -> ChatResult | ChatStream:
        """Answer a conversation: `messages` as OpenAI's chat API takes them (role, content as
        a string or text parts, an assistant's tool_calls, a tool's tool_call_id); a last
        assistant message is continued (prefill).

        `tools`: OpenAI function tools ({"type": "function", "function": {"name",
        "description", "parameters"}}); `tool_choice`: "auto" (the default with tools: the
        model answers or calls, and a call is held to its tool's schema), "none", "required"
        or {"type": "function", "function": {"name": ...}}; `parallel_tool_calls`: more than
        one call per answer. `response_format`: {"type": "json_object"} or {"type":
        "json_schema", "json_schema": {"schema": ...}}, for an answer without tools.
        `template_kwargs` reach the chat template as variables (`enable_thinking`,
        `reasoning_effort`). `sampling`: generate()'s keyword arguments (max_tokens,
        temperature, top_p, top_k, min_p, seed, stop, ...).

        Returns a ChatResult (text, reasoning, tool_calls, finish_reason, usage); with
        `stream=True` a ChatStream of Events (text, reasoning, one whole tool call) then that
        ChatResult. llamay.InvalidRequest for a request it cannot take, GrammarError for a
        schema it cannot enforce, ContextOverflow for a conversation too long for a context.
        """
        tools = read_tools(list(tools)) if tools is not None else None
        choice = read_choice(tool_choice, tools)
        offered = tools if tools and choice.mode != "none" else None
        prefill = prefill_of(messages)
        if offered:
            grammar = tool_grammar(
                self,
                offered,
                choice.mode,
                choice.name,
                parallel=parallel_tool_calls,
                prefill=prefill,
            )
        else:
            output = read_format(response_format)
            grammar = output.grammar() if output is not None else None
        ids = chat_prompt(
            self,
            messages,
            tools=offered,
            reserve=sampling.get("max_tokens") or 1,
            template_kwargs=template_kwargs,
        )
        if grammar is not None:
            sampling["grammar"] = grammar
        generation = self.generate(ids, **sampling)
        reply = ChatStream(generation, answer_reader(self, ids, offered, prefill), len(ids))
        return reply if stream else reply.collect()
