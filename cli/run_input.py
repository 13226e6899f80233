"""What a chat user types: one line per turn, a turn of several lines between triple quotes, and
on a terminal line editing with a history kept in $LLAMAY_HOME/history."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import NamedTuple

from llamay.paths import llamay_home

BLOCK = '"""'
HISTORY_LINES = 1000


class Entry(NamedTuple):
    text: str
    command: bool  # a /command (a line starting with "/"; never a quoted block)


class Input:
    """Reads entries from stdin. On a terminal (stdin and stdout both), input() edits lines with
    readline, and each line typed is appended to the history file as it is entered, so a session
    that is killed keeps what was typed."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.history: Path | None = None
        self._readline = None
        if self.interactive:
            with contextlib.suppress(ImportError):  # not every Python has readline
                import readline

                self._readline = readline
                # (a readline built on libedit may lack appending: then no history file)
                if hasattr(readline, "append_history_file"):
                    self.history = llamay_home() / "history"
                    self._load_history()

    def read(self) -> Entry | None:
        """The next entry, or None at the end of input or /bye. KeyboardInterrupt (Ctrl-C)
        abandons what was being typed."""
        line = self._line(">>> ")
        if line is None or line.strip() == "/bye":
            return None
        if line.lstrip().startswith(BLOCK):
            return Entry(self._block(line.lstrip()[len(BLOCK) :]), command=False)
        return (
            Entry(line.strip(), command=True)
            if line.strip().startswith("/")
            else Entry(line, False)
        )

    def _block(self, first: str) -> str:
        """The text between the opening and the closing triple quotes (which ends a line); the
        end of input closes a block too."""
        lines = []
        line: str | None = first
        while line is not None:
            end = line.rstrip().endswith(BLOCK)
            lines.append(line.rstrip()[: -len(BLOCK)] if end else line)
            if end:
                break
            line = self._line("... ")
        # `"""` alone on the first or last line frames the text without adding an empty line.
        if len(lines) > 1 and lines[0] == "":
            lines.pop(0)
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        return "\n".join(lines)

    def _line(self, prompt: str) -> str | None:
        readline = self._readline
        before = readline.get_current_history_length() if readline else 0
        try:
            line = input(prompt if self.interactive else "")
        except EOFError:
            return None
        if readline and self.history and readline.get_current_history_length() > before:
            with contextlib.suppress(OSError):  # history is a convenience, never an error
                self.history.touch()
                readline.append_history_file(1, str(self.history))
        return line

    def _load_history(self) -> None:
        readline = self._readline
        with contextlib.suppress(OSError):
            readline.read_history_file(str(self.history))
            if readline.get_current_history_length() > HISTORY_LINES:
                readline.set_history_length(HISTORY_LINES)
                readline.write_history_file(str(self.history))  # trimmed to the newest lines
