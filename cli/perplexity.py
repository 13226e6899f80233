"""`llamay perplexity MODEL -f FILE`: how well MODEL predicts a text, as llama.cpp measures it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

import llamay
from llamay.errors import LlamayError

from .inputs import read_text_file


@click.command()
@click.argument("model")
@click.option(
    "-f",
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The text to score (UTF-8).",
)
@click.option(
    "-c",
    "--ctx-size",
    "n_ctx",
    type=click.IntRange(min=2),
    default=512,
    show_default=True,
    help="Tokens per chunk.",
)
@click.option(
    "-b",
    "--batch-size",
    "n_batch",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Tokens evaluated per forward step.",
)
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads. [default: all cores]")
@click.option("--json", "as_json", is_flag=True, help='Print {"ppl", "chunks", "tokens"}.')
def perplexity(
    model: str, file: Path, n_ctx: int, n_batch: int, threads: int | None, as_json: bool
) -> None:
    """Print MODEL's perplexity on the text of FILE, by llama.cpp's method.

    The text is tokenized once (with BOS when the model asks for it) and cut into chunks of -c
    tokens; each chunk is evaluated alone, starting with BOS, and only the second half of each
    chunk is scored, so that every scored token sees at least half a chunk of context. The
    perplexity so far is shown after each chunk on stderr; the last line on stdout is the result.
    """
    text = read_text_file(file)
    loaded = llamay.load(model, threads=threads, n_ctx=n_ctx)
    try:
        tokens = loaded.tokenize(text, add_bos=True, special=False)  # as llama-perplexity
        n_chunks = len(tokens) // n_ctx
        if n_chunks == 0:
            raise LlamayError(
                f"{file}: {len(tokens)} tokens, fewer than one chunk of {n_ctx} (-c); "
                "use a longer text or a smaller -c"
            )
        click.echo(
            f"perplexity: {n_chunks} chunks of {n_ctx} tokens, batch {n_batch}, "
            "the second half of each scored",
            err=True,
        )
        result, _, scored = llamay.engine.perplexity(
            loaded, tokens, n_ctx=n_ctx, n_batch=n_batch, on_chunk=_show_progress
        )
        sys.stderr.write("\n")
    finally:
        loaded.close()
    if as_json:
        click.echo(json.dumps({"ppl": result, "chunks": n_chunks, "tokens": scored}))
    else:
        click.echo(f"PPL = {result:.4f}")


def _show_progress(chunk: int, ppl: float) -> None:
    """llama-perplexity's running figure after each chunk: [1]13.2451,[2]14.0022,..."""
    sys.stderr.write(f"[{chunk}]{ppl:.4f},")
    sys.stderr.flush()
