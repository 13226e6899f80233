"""Reading the user's input files, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

from llamay.errors import LlamayError


def read_text_file(path: Path) -> str:
    """The UTF-8 text of a file given on the command line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LlamayError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
