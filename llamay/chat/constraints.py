"""The grammar of the calls a chat request offers tools for.

`tool_grammar` holds the calls of the offered tools in the model's own call format
(toolcalls.py), lazily under tool_choice "auto". An output format's grammar is its own
(spellings.OutputFormat.grammar), as the tools and the choice are read there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llamay.chat.toolcalls import call_grammar, format_of
from llamay.engine import Model


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
