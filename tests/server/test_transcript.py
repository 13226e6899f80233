"""The conversation a chat context keeps (llamay/server/transcript.py), with the chat templates
of tests/data/chat_templates and no model: what adding turns feeds, and which notes count as
a conversation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from llamay.chat import render_chat
from llamay.server import transcript
from llamay.server.errors import ApiError
from llamay.tokenizer.chat import ChatTemplate

TEMPLATES = sorted((Path(__file__).parents[1] / "data" / "chat_templates").glob("*.jinja"))
# Templates that write an earlier turn differently once more turns follow: Llama 2 puts a
# space before an answer it writes (a prefilled answer has none), Mistral moves the system
# prompt to the last user turn.
REWRITE_EARLIER_TURNS = {"meta-llama-Llama-2-7b-chat-hf", "mistralai-Mistral-7B-Instruct-v0.3"}
SYSTEM = {"role": "system", "content": "Be brief."}
QUESTION = {"role": "user", "content": "Name a colour."}
FOLLOW_UP = {"role": "user", "content": "And another?"}


def model_of(path: Path) -> SimpleNamespace:
    """What render_chat needs of a model: its chat template."""
    return SimpleNamespace(
        chat_template=ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>")
    )


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda path: path.stem)
def test_added_turns_are_what_the_template_writes_after_the_answer(path):
    model = model_of(path)
    turns = transcript.answered(transcript.started([SYSTEM, QUESTION]), "Blue.")
    added = transcript.continuation(model, turns, [FOLLOW_UP])
    whole = render_chat(model, transcript.extended(turns, [FOLLOW_UP]))
    # the end of the answer's turn, the new turn and the next generation prompt
    assert whole[whole.rindex("Blue.") + len("Blue.") :] == added
    assert "And another?" in added and "Blue." not in added
    if path.stem not in REWRITE_EARLIER_TURNS:
        # what the context holds (the prompt and the answer so far), then what is added, is
        # the whole conversation as the template writes it
        assert render_chat(model, turns) + added == whole


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda path: path.stem)
def test_a_trailing_assistant_turn_is_left_open(path):
    model = model_of(path)
    turns = transcript.answered(transcript.started([QUESTION]), "Blue.")
    added = [FOLLOW_UP, {"role": "assistant", "content": "Green"}]
    text = transcript.continuation(model, turns, added)
    assert text.endswith("Green")
    assert transcript.extended(turns, added)[-1] == {"role": "assistant", "content": "Green"}


def test_the_conversation_is_kept_with_an_open_answer():
    turns = transcript.started([SYSTEM, QUESTION])
    assert turns == [SYSTEM, QUESTION, {"role": "assistant", "content": ""}]
    turns = transcript.answered(turns, "Blue")
    turns = transcript.answered(turns, ".")
    assert turns[-1] == {"role": "assistant", "content": "Blue."}
    assert transcript.extended(turns, [FOLLOW_UP])[-2:] == [
        FOLLOW_UP,
        {"role": "assistant", "content": ""},
    ]
    note = {"model": "m"}
    kept = transcript.noted(note, turns)
    assert kept == {"model": "m", "messages": turns} and note == {"model": "m"}
    assert transcript.of(kept) == turns
    # text parts are read as their text; anything but plain turns keeps no conversation
    parts = {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
    assert transcript.started([parts])[0] == {"role": "user", "content": "Hi"}
    call = {"role": "assistant", "content": "", "tool_calls": []}
    assert transcript.started([QUESTION, call]) is None
    assert transcript.started([{"role": "tool", "content": "x"}]) is None


@pytest.mark.parametrize(
    "note",
    [
        None,
        [],
        {"model": "m"},
        {"messages": []},
        {"messages": "hi"},
        {"messages": [QUESTION]},  # no open answer
        {"messages": [{"role": "wizard", "content": "x"}, {"role": "assistant", "content": ""}]},
        {"messages": [{"role": "user", "content": 1}, {"role": "assistant", "content": ""}]},
        {"messages": [{"role": "user"}, {"role": "assistant", "content": ""}]},
        {"messages": [{**QUESTION, "extra": 1}, {"role": "assistant", "content": ""}]},
        {"messages": ["user", {"role": "assistant", "content": ""}]},
    ],
)
def test_a_note_that_holds_no_well_formed_conversation_is_none(note):
    assert transcript.of(note) is None


@pytest.mark.parametrize(
    ("turns", "fragment"),
    [
        ([], "non-empty list"),
        ({"role": "user"}, "non-empty list"),
        ([SYSTEM], "a system message begins a conversation"),
        ([{"role": "user", "content": None}], "must be a string"),
        ([{"role": "user", "content": "x", "name": "n"}], "{'role', 'content'}"),
        (["hi"], "{'role', 'content'}"),
    ],
)
def test_turns_to_add_are_checked(turns, fragment):
    with pytest.raises(ApiError) as refused:
        transcript.added_turns(turns)
    assert refused.value.status == 400 and fragment in refused.value.message


def test_a_template_that_drops_earlier_answers_is_a_clear_400():
    forgetful = "{% for m in messages if m.role == 'user' %}{{ m.content }}\n{% endfor %}>"
    model = SimpleNamespace(chat_template=ChatTemplate(forgetful))
    turns = transcript.answered(transcript.started([QUESTION]), "Blue.")
    with pytest.raises(ApiError) as refused:
        transcript.continuation(model, turns, [FOLLOW_UP])
    assert refused.value.status == 400
    assert "does not write earlier answers back" in refused.value.message
