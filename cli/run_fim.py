"""`llamay run MODEL --fim-prefix TEXT --fim-suffix TEXT`: the code between a prefix and a
suffix, asked of a fill-in-the-middle model (llamay/tokenizer/fim.py), printed as it is made."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from llamay.engine import Model
from llamay.tokenizer.fim import fim_prompt

from .inputs import read_text_file

FIM_FLAGS = ("fim_prefix", "fim_suffix", "fim_prefix_file", "fim_suffix_file")


def fim_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--fim-prefix/--fim-suffix and their file forms."""
    file = click.Path(exists=True, dir_okay=False, path_type=Path)
    for option in reversed(
        (
            click.option(
                "--fim-prefix",
                metavar="TEXT",
                help="Fill in the middle: the code before the cursor. Prints only the code "
                "the model puts between it and --fim-suffix (a FIM model: Qwen2.5-Coder...).",
            ),
            click.option(
                "--fim-suffix",
                metavar="TEXT",
                help="Fill in the middle: the code after the cursor.",
            ),
            click.option("--fim-prefix-file", type=file, help="--fim-prefix read from a file."),
            click.option("--fim-suffix-file", type=file, help="--fim-suffix read from a file."),
        )
    ):
        command = option(command)
    return command


def wants_fim(options: dict[str, Any]) -> bool:
    return any(options.get(name) is not None for name in FIM_FLAGS)


def check_fim(options: dict[str, Any], prompt: str | None, raw: bool, system: str | None) -> None:
    """Usage errors of a FIM run: each side given once, no PROMPT, template or system."""
    for side in ("prefix", "suffix"):
        if options.get(f"fim_{side}") is not None and options.get(f"fim_{side}_file") is not None:
            raise click.UsageError(f"give --fim-{side} or --fim-{side}-file, not both")
    if prompt is not None:
        raise click.UsageError(
            "a FIM run takes no PROMPT: the code goes in --fim-prefix/--fim-suffix"
        )
    if raw or system is not None:
        raise click.UsageError(
            "--raw and --system do not apply to a FIM run (it uses no chat template)"
        )


def fim_ids(model: Model, name: str, options: dict[str, Any], max_tokens: int | None) -> list[int]:
    """The FIM prompt of the run's prefix and suffix (either may be empty)."""

    def side(which: str) -> str:
        path = options.get(f"fim_{which}_file")
        return read_text_file(path) if path is not None else options.get(f"fim_{which}") or ""

    return fim_prompt(
        model.tokenizer,
        side("prefix"),
        side("suffix"),
        n_ctx=model.n_ctx,
        reserve=max_tokens,
        name=name,
    )
