"""`llamay run` as a daily tool, on a small synthetic model: messages of several lines, /set,
/show, /clear, the context meter, a pulled model's defaults, Ctrl-C in an answer, and the
readline history on a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading
from pathlib import Path

import pytest

import llamay
from llamay import store
from llamay.engine.generate import chat_prompt_ids

from helpers.clitools import LLAMAY, default_sigint, interrupt_answer, run_llamay
from helpers.waiting import wait_until

SYNTH = Path(__file__).parent.parent / "data" / "synth"
QWEN2 = SYNTH / "qwen2-Q8_0.gguf"  # ChatML template, context 2048
LLAMA2 = SYNTH / "llama2-spm-Q8_0.gguf"

GREEDY = ("--temp", "0", "-n", "6")


def chat(*args: str, stdin: str) -> subprocess.CompletedProcess:
    result = run_llamay("run", str(QWEN2), *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    return result


def greedy_answer(model, prompt: str, n: int, system: str | None = None) -> str:
    """What the Python API answers greedily to one user message, which the first turn of a chat
    (and `llamay run MODEL PROMPT --temp 0 -n N`) prints."""
    head = [{"role": "system", "content": system}] if system is not None else []
    rendered = model.chat_template.render([*head, {"role": "user", "content": prompt}])
    generation = model.generate(chat_prompt_ids(model, rendered), temperature=0, max_tokens=n)
    text = "".join(piece.text for piece in generation.pieces())
    generation.context.close()
    return text


def meters(stderr: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^\[(\d+)/(\d+) tokens\]$", stderr, re.M)]


@pytest.fixture(scope="module")
def qwen2():
    model = llamay.load(QWEN2)
    yield model
    model.close()


def prompt_tokens(model, text: str) -> int:
    rendered = model.chat_template.render([{"role": "user", "content": text}])
    return len(chat_prompt_ids(model, rendered))


def test_a_message_of_several_lines_goes_between_triple_quotes(qwen2):
    result = chat(*GREEDY, stdin='"""\nHello\nthere\n"""\n/clear\n"""Hello"""\n')
    two_lines, one_line = greedy_answer(qwen2, "Hello\nthere", 6), greedy_answer(qwen2, "Hello", 6)
    assert result.stdout == two_lines + "\n" + one_line + "\n"
    # the meters count exactly the prompts "Hello\nthere" and "Hello", and 6 tokens each
    assert meters(result.stderr) == [
        (prompt_tokens(qwen2, "Hello\nthere") + 6, qwen2.n_ctx),
        (prompt_tokens(qwen2, "Hello") + 6, qwen2.n_ctx),
    ]


def test_the_context_meter_follows_each_answer(qwen2):
    result = chat("--temp", "0", "-n", "5", stdin="Hello\nAgain\n")
    first, second = meters(result.stderr)
    assert first == (prompt_tokens(qwen2, "Hello") + 5, qwen2.n_ctx)
    assert second[0] > first[0] + 5 and second[1] == qwen2.n_ctx


def test_set_changes_the_next_answers_settings(qwen2):
    result = chat(
        stdin="/set temperature 0\n/set num_predict 4\n/set system Be brief.\n/set top_k x\n"
        "/set nothing 1\nHello\n"
    )
    assert result.stdout == greedy_answer(qwen2, "Hello", 4, "Be brief.") + "\n"
    assert "(temperature is 0.0)" in result.stderr and "(num_predict is 4)" in result.stderr
    assert "error: top_k 'x': not an integer" in result.stderr
    assert "error: no parameter 'nothing'" in result.stderr


def test_set_alone_lists_the_settings_and_set_name_restores_the_default():
    result = chat("--temp", "0.5", stdin="/set num_predict 9\n/set num_predict\n/set\n")
    listing = result.stderr[result.stderr.index("parameters:") :]
    assert re.search(r"^  temperature +0\.5 ", listing, re.M)
    assert re.search(r"^  num_predict +none ", listing, re.M)
    assert re.search(r"^  system +\(none\)$", listing, re.M)


def test_show_describes_the_model_the_settings_the_system_prompt_and_the_template(qwen2):
    result = chat("--system", "You are a cat.", "--seed", "5", stdin="/show\n/show template\n")
    assert "architecture  qwen2" in result.stderr
    assert f"context       {qwen2.n_ctx} tokens" in result.stderr
    assert re.search(r"^  seed +5 ", result.stderr, re.M)
    assert "system:\n  You are a cat.\n" in result.stderr
    template = "\n".join("  " + line for line in qwen2.chat_template.source.splitlines())
    assert result.stderr.count("template:\n" + template) == 2
    wrong = chat(stdin="/show everything\n")
    assert "/show takes one of: info, parameters, system, template" in wrong.stderr


def test_clear_and_its_alias_reset_forget_the_conversation(qwen2):
    result = chat(*GREEDY, stdin="Hello\n/clear\nHello\n/reset\nHello\n")
    answer = greedy_answer(qwen2, "Hello", 6)
    assert result.stdout == (answer + "\n") * 3
    assert result.stderr.count("(the conversation is cleared)") == 2
    assert len(set(meters(result.stderr))) == 1  # each answer starts from an empty context


def test_a_stop_string_cuts_the_answer_and_the_chat_goes_on(qwen2):
    answer = greedy_answer(qwen2, "Hello", 12)
    stop = answer.strip().split()[1]
    cut = answer[: answer.index(stop)]
    result = chat("--temp", "0", "-n", "12", "--stop", stop, stdin="Hello\nAgain\n")
    # The context held the stop string's tokens, the conversation does not: the second turn
    # starts from the conversation as it reads, rendered afresh.
    messages = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": cut},
        {"role": "user", "content": "Again"},
    ]
    ids = chat_prompt_ids(qwen2, qwen2.chat_template.render(messages))
    generation = qwen2.generate(ids, temperature=0, max_tokens=12, stop=[stop])
    second = "".join(piece.text for piece in generation.pieces())
    generation.context.close()
    assert result.stdout == cut + "\n" + second + "\n"
    assert meters(result.stderr)[1][0] == len(ids) + generation.n_generated


def test_a_pulled_models_params_and_system_are_defaults_that_flags_override(qwen2):
    home = Path(os.environ["LLAMAY_HOME"])
    (home / "blobs").unlink()  # a store of its own: the synthetic model is not shared
    store.create(
        "tiny-params",
        from_=str(QWEN2),
        params={"temperature": 0, "num_predict": 5, "top_k": 7, "num_ctx": 256},
        system="Be brief.",
    )
    by_layer = run_llamay("run", "tiny-params", "Hello")
    assert by_layer.returncode == 0, by_layer.stderr
    assert by_layer.stdout == greedy_answer(qwen2, "Hello", 5, "Be brief.")
    overridden = run_llamay("run", "tiny-params", "Hello", "-n", "3", "--system", "Be long.")
    assert overridden.stdout == greedy_answer(qwen2, "Hello", 3, "Be long.")
    shown = run_llamay("run", "tiny-params", stdin="/show\n")
    assert re.search(r"^  top_k +7 ", shown.stderr, re.M)
    assert "context       256 tokens" in shown.stderr  # num_ctx sizes the context
    assert "system:\n  Be brief.\n" in shown.stderr


def test_ctrl_c_in_an_answer_keeps_the_session_for_the_next_turn():
    process = subprocess.Popen(
        [str(LLAMAY), "run", str(LLAMA2), "--temp", "1", "--min-p", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=default_sigint,
    )
    process.stdin.write(b"Tell me the whole license\n")
    process.stdin.flush()
    _, said = interrupt_answer(process, stopped=b" tokens]\n")  # the answer's meter
    process.stdin.write(b"/set num_predict 3\nHello\n")
    process.stdin.close()
    assert process.wait(timeout=120) == 0
    stderr = (said + process.stderr.read()).decode()
    assert "Traceback" not in stderr
    first, second = meters(stderr)
    assert first[0] < first[1]  # stopped: the context was not filled
    assert second[0] > first[0]  # the next turn continued the same conversation


# --- on a terminal -------------------------------------------------------------------------------


def _session(keys: list[bytes], timeout: float = 120) -> int:
    """Run a chat on a pseudo-terminal, typing each of `keys` once the prompt shows; returns
    the exit status."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [str(LLAMAY), "run", str(QWEN2), *GREEDY],
        stdin=terminal,
        stdout=terminal,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TERM": "dumb"},
    )
    os.close(terminal)
    seen = bytearray()
    done = threading.Event()

    def drain() -> None:
        while not done.is_set():
            try:
                data = os.read(controller, 4096)
            except OSError:  # the terminal closed with the process
                return
            if not data:
                return
            seen.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        for n, key in enumerate(keys, 1):
            wait_until(lambda n=n: seen.count(b">>> ") >= n, timeout, f"prompt {n} did not show")
            os.write(controller, key)
        return process.wait(timeout=timeout)
    finally:
        done.set()
        process.kill()
        os.close(controller)


def test_on_a_terminal_each_line_goes_to_the_history_file_and_comes_back_next_time():
    history = Path(os.environ["LLAMAY_HOME"]) / "history"
    assert _session([b"Hello\r", b"/bye\r"]) == 0
    assert history.read_text().splitlines() == ["Hello", "/bye"]
    # Up-arrow recalls the last line of the last session: /bye, which ends this one (and, the
    # same as the line before it, is not added again).
    assert _session([b"\x1b[A\r"]) == 0
    assert history.read_text().splitlines() == ["Hello", "/bye"]
