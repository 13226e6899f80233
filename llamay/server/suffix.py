"""A `suffix` on a raw completion (OpenAI /v1/completions, Ollama /api/generate): the prompt is
the code before the cursor, the suffix the code after it, and the answer what goes between,
asked of the model through its fill-in-the-middle tokens (llamay/tokenizer/fim.py) as
/infill asks it. Code-completion clients (Continue and others) send it so.

An empty suffix on a model without FIM tokens is a plain completion (nothing comes after the
cursor); any other suffix on such a model is a 400 naming what the model lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llamay.engine import Model
from llamay.errors import InfillUnsupported
from llamay.server.errors import ApiError
from llamay.tokenizer.fim import fim_prompt, supports_infill


def filled(
    model: Model,
    name: str,
    prompts: Sequence[str | Sequence[int]],
    suffix: Any,
    reserve: int | None,
) -> list[str | Sequence[int]]:
    """Each prompt (text, or token ids) made a FIM prompt before `suffix`, leaving `reserve`
    tokens of the context for the answer; the prompts as they are for an empty suffix on a
    model that cannot fill in."""
    if not isinstance(suffix, str):
        raise ApiError(400, "suffix must be a string: the text after the insertion", "suffix")
    if not suffix and not supports_infill(model.tokenizer):
        return list(prompts)
    try:
        return [
            fim_prompt(
                model.tokenizer, prompt, suffix, n_ctx=model.n_ctx, reserve=reserve, name=name
            )
            for prompt in prompts
        ]
    except InfillUnsupported as error:
        raise ApiError(400, f"suffix: {error}", "suffix") from None
