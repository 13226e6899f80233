"""The chat layer, between the engine and the server: a conversation in, an answer out.

It owns what makes a model a chat model: the conversation-to-prompt step through the model's
chat template (prompt.py), the tool-call formats that templates teach and models write
(toolcalls.py), what a request asks for in each API's spelling (tools, the tool choice, the
output format: spellings.py) and the grammar of its calls (constraints.py), and the reading of
an answer into text, reasoning and tool calls as it is generated (answer.py). `Model.chat` (model.py,
reply.py) puts it all behind one call. The server's API families and the CLI use it; it knows
nothing of either.
"""

from __future__ import annotations

from llamay.chat.answer import Answer, Event, answer_reader, reasoning_of
from llamay.chat.calls import ToolCall
from llamay.chat.constraints import tool_grammar
from llamay.chat.model import Model
from llamay.chat.prompt import (
    bounded_text,
    chat_prompt,
    fit,
    prefill_of,
    render_chat,
    text_of,
    text_prompt,
)
from llamay.chat.reply import ChatResult, ChatStream, Usage, finish_reason_of
from llamay.chat.spellings import OutputFormat, ToolChoice, read_choice, read_format, read_tools

__all__ = [
    "Answer",
    "ChatResult",
    "ChatStream",
    "Event",
    "Model",
    "OutputFormat",
    "ToolCall",
    "ToolChoice",
    "Usage",
    "answer_reader",
    "bounded_text",
    "chat_prompt",
    "finish_reason_of",
    "fit",
    "prefill_of",
    "read_choice",
    "read_format",
    "read_tools",
    "reasoning_of",
    "render_chat",
    "text_of",
    "text_prompt",
    "tool_grammar",
]
