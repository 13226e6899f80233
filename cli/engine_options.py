"""The engine options that several commands take, written once: --lookup, --draft and
--kv-type."""

from __future__ import annotations

import click

from llamay.engine.ranges import RANGES
from llamay.state.layout import KV_TYPES

_LOOKUP = RANGES["lookup"]

lookup_option = click.option(
    "--lookup",
    type=click.IntRange(int(_LOOKUP.low), int(_LOOKUP.high)),
    default=0,
    show_default=True,
    help="Prompt-lookup decoding: verify up to N draft tokens copied from earlier in the "
    "context per step (the same tokens, fewer steps when the text repeats; 0: off).",
)


draft_option = click.option(
    "--draft",
    metavar="MODEL",
    help="Speculative decoding with a draft model of the same vocabulary (a .gguf path or a "
    "store name): it proposes the next tokens, the model verifies them in one step (the same "
    "tokens, fewer steps when it guesses well).",
)


def kv_type_option(what: str = "the KV cache") -> click.Option:
    """--kv-type, its help naming `what` the type is of; None (not given): the model's own."""
    return click.option(
        "--kv-type",
        type=click.Choice(KV_TYPES, case_sensitive=False),
        help=f"Element type of {what}. [default: the model's: F16, or F32 for embedding models]",
    )
