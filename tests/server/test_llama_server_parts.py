"""The parts of llama-server's routes that need no model: the cuts made on code completions
(n_indent, t_max_predict_ms), response_fields, and slot snapshot names."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamay.engine.generate import Piece
from llamay.server import llama_server
from llamay.server.errors import ApiError
from llamay.server.llama_server import CompletionText
from llamay.server.llama_server_fields import project
from llamay.server.slots import slot_file


def read(text: CompletionText, pieces: list[str]) -> str:
    shown = ""
    for i, piece in enumerate(pieces):
        if text.cut:
            break
        shown += text.take(Piece(i, piece))
    return shown + text.flush()


def test_a_line_indented_less_than_n_indent_ends_the_answer_without_it():
    pieces = ["x = 1", "\n", "    ", "  y", " = 2\n", "  ", "z = 3\n"]
    text = CompletionText(n_indent=4)
    assert read(text, pieces) == "x = 1\n      y = 2\n"
    assert text.cut and text.text == "x = 1\n      y = 2\n"


def test_the_first_line_and_blank_lines_are_not_held_to_n_indent():
    text = CompletionText(n_indent=4)
    assert read(text, ["a", "\n", "\n", "    b\n", "  "]) == "a\n\n    b\n  "
    assert not text.cut


def test_whitespace_at_the_end_is_released_not_lost():
    text = CompletionText(n_indent=4)
    assert read(text, ["a\n", "  "]) == "a\n  "


def test_t_max_predict_ms_ends_at_the_next_newline(monkeypatch):
    clock = iter([0.0, 0.001, 0.5, 0.6, 0.7])
    monkeypatch.setattr(llama_server.time, "monotonic", lambda: next(clock))
    text = CompletionText(t_max_predict_ms=100)
    # the newline at 1 ms is within the budget; the one at 600 ms is not
    assert read(text, ["a", "\n", "b", "c\n", "d"]) == "a\nbc\n"
    assert text.cut and text.has_new_line


def test_response_fields_keep_what_they_name_under_their_path():
    answer = {"content": "x", "timings": {"prompt_n": 3}, "tokens_cached": 2}
    assert project(answer, ["content", "timings/prompt_n", "missing", "content/x"]) == {
        "content": "x",
        "timings/prompt_n": 3,
    }
    assert project(answer, None) is answer
    assert project(answer, [""]) == {}


@pytest.mark.parametrize(
    "name",
    ["../x", "..", ".", ".hidden", "a/b", "a\\b", "", "x" * 201, "-rf", "a b", "é.bin", 7, None],
)
def test_slot_snapshot_names_that_could_leave_the_directory_are_refused(name):
    with pytest.raises(ApiError) as refused:
        slot_file(Path("/slots"), name)
    assert refused.value.status == 400 and refused.value.param == "filename"


def test_slot_snapshot_names_and_a_server_without_a_directory():
    assert slot_file(Path("/slots"), "main.c-v2_cache.bin") == Path("/slots/main.c-v2_cache.bin")
    with pytest.raises(ApiError, match="--slot-save-path"):
        slot_file(None, "a.bin")
