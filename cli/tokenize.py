"""`llamay tokenize MODEL TEXT`: the token ids a model's vocabulary gives a text."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llamay import load_tokenizer

from .inputs import read_text_file


@click.command()
@click.argument("model")
@click.argument("text", required=False)
@click.option(
    "-f",
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the text from FILE (UTF-8) instead of TEXT.",
)
@click.option("--no-bos", is_flag=True, help="Do not add the BOS (or EOS) the model asks for.")
@click.option(
    "--no-special",
    is_flag=True,
    help="Treat special tokens written in the text (<start_of_turn>...) as plain text.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list of token ids.")
def tokenize(
    model: str, text: str | None, file: Path | None, no_bos: bool, no_special: bool, as_json: bool
) -> None:
    """Print the tokens of TEXT (or of -f FILE) in MODEL's vocabulary.

    By default the BOS token is added when the model asks for it and special tokens written in
    the text are recognised, as llama.cpp does. Each line shows a token id, a tab, and the
    token's text as a Python string literal; a token that is part of a character (a byte
    token) shows as a bytes literal, b'\\xf0'.
    """
    if (text is None) == (file is None):
        raise click.UsageError("give either TEXT or -f FILE")
    if file is not None:
        text = read_text_file(file)
    tokenizer = load_tokenizer(model)
    ids = tokenizer.tokenize(text, add_bos=not no_bos, special=not no_special)
    if as_json:
        click.echo(json.dumps(ids))
        return
    for token in ids:
        click.echo(f"{token}\t{_shown(tokenizer.token_to_piece(token, special=True))}")


def _shown(piece: bytes) -> str:
    try:
        return repr(piece.decode("utf-8"))
    except UnicodeDecodeError:  # a byte token: part of a character
        return repr(piece)
