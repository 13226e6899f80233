"""`llamay run` on the small synthetic models: one prompt (raw and through the chat template),
greedy reproducibility across thread counts, the token budget, errors, and the interactive chat
driven through stdin."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import llamay
from llamay.engine.generate import chat_prompt_ids, generate
from llamay.models.synthetic import requantize

from helpers.clitools import LLAMAY, assert_user_error, run_llamay

SYNTH = Path(__file__).parent.parent / "data" / "synth"
LLAMA2 = SYNTH / "llama2-spm-Q8_0.gguf"  # SPM, BOS; no template in the file: the built-in llama2
QWEN2 = SYNTH / "qwen2-Q8_0.gguf"  # BPE, no BOS; the file's ChatML template


llamay_cli = run_llamay


def greedy_text(model, ids: list[int], n: int) -> str:
    """What the Python API generates greedily after `ids`, as text continuing the prompt."""
    generation = generate(model, ids, max_tokens=n, temperature=0)
    decoder = model.tokenizer.stream()
    text = "".join(decoder.feed(token) for token in generation) + decoder.flush()
    generation.context.close()
    return text


@pytest.fixture(scope="module")
def llama2():
    model = llamay.load(LLAMA2)
    yield model
    model.close()


# --- one prompt ----------------------------------------------------------------------------------


def test_raw_greedy_prints_exactly_the_generated_text(llama2):
    result = llamay_cli("run", str(LLAMA2), "The license", "--raw", "--temp", "0", "-n", "24")
    assert result.returncode == 0, result.stderr
    ids = llama2.tokenize("The license", add_bos=True, special=True)
    assert result.stdout == greedy_text(llama2, ids, 24)
    assert f"prompt {len(ids)} tokens" in result.stderr
    assert "generated 24 tokens" in result.stderr and "finish: length" in result.stderr


def test_greedy_text_is_the_same_on_one_and_two_threads():
    outputs = {
        threads: llamay_cli(
            "run",
            str(LLAMA2),
            "You may copy",
            "--raw",
            "--temp",
            "0",
            "-n",
            "32",
            "--threads",
            threads,
        )
        for threads in ("1", "2")
    }
    assert all(result.returncode == 0 for result in outputs.values())
    assert outputs["1"].stdout == outputs["2"].stdout != ""


def test_n_bounds_the_tokens_generated():
    short = llamay_cli("run", str(LLAMA2), "1. Definitions", "--raw", "--temp", "0", "-n", "5")
    longer = llamay_cli("run", str(LLAMA2), "1. Definitions", "--raw", "--temp", "0", "-n", "20")
    assert short.returncode == 0 and longer.returncode == 0
    assert "generated 5 tokens" in short.stderr and "generated 20 tokens" in longer.stderr
    assert longer.stdout.startswith(short.stdout) and len(longer.stdout) > len(short.stdout)


def test_a_draft_model_changes_no_token(tmp_path):
    draft = requantize(LLAMA2, tmp_path / "draft-Q4_0.gguf", "Q4_0")
    args = ("run", str(LLAMA2), "The license", "--raw", "-n", "32", "--temp", "0.8", "--seed", "3")
    plain, drafted = llamay_cli(*args), llamay_cli(*args, "--draft", str(draft))
    assert plain.returncode == drafted.returncode == 0, drafted.stderr
    assert drafted.stdout == plain.stdout != ""
    assert re.search(r"draft \d+ of \d+ tokens accepted", drafted.stderr)
    refused = llamay_cli(*args, "--draft", str(SYNTH / "qwen2-Q8_0.gguf"))
    assert_user_error(refused, "qwen2-Q8_0.gguf cannot draft for llama2-spm-Q8_0.gguf")


def test_seeded_sampling_repeats_and_reports_its_seed():
    args = ("run", str(LLAMA2), "The license", "--raw", "-n", "16", "--temp", "1.5", "--top-k", "0")
    first, again = llamay_cli(*args, "--seed", "7"), llamay_cli(*args, "--seed", "7")
    other = llamay_cli(*args, "--seed", "8")
    assert first.stdout == again.stdout != other.stdout
    assert "seed 7" in first.stderr
    unseeded = llamay_cli(*args)
    assert "seed " in unseeded.stderr


def test_the_prompt_goes_through_the_chat_template_with_one_bos(llama2):
    result = llamay_cli(
        "run", str(LLAMA2), "Hello", "--temp", "0", "-n", "12", "--system", "Be brief."
    )
    assert result.returncode == 0, result.stderr
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    rendered = llama2.chat_template.render(messages, add_generation_prompt=True)
    assert rendered.startswith("<s>")  # the llama2 template writes its own BOS
    ids = chat_prompt_ids(llama2, rendered)
    assert ids[:2] != [llama2.tokenizer.bos_id] * 2 and ids[0] == llama2.tokenizer.bos_id
    assert result.stdout == greedy_text(llama2, ids, 12)


def test_a_model_without_bos_gets_none_from_the_template():
    model = llamay.load(QWEN2)
    rendered = model.chat_template.render([{"role": "user", "content": "Hello"}])
    ids = chat_prompt_ids(model, rendered)
    assert ids == model.tokenize(rendered, add_bos=False, special=True)
    result = llamay_cli("run", str(QWEN2), "Hello", "--temp", "0", "-n", "10")
    assert result.returncode == 0, result.stderr
    assert result.stdout == greedy_text(model, ids, 10)
    model.close()


def test_a_missing_model_is_one_error_line(tmp_path):
    missing = tmp_path / "nope.gguf"
    assert_user_error(llamay_cli("run", str(missing), "hi", "--raw"), str(missing))


def test_a_prompt_longer_than_the_context_is_refused():
    prompt = "The license of the Library " * 20
    result = llamay_cli("run", str(LLAMA2), prompt, "--raw", "-c", "32")
    assert_user_error(result, "the prompt is", "the context holds 32")


def test_raw_and_system_together_are_a_usage_error():
    result = llamay_cli("run", str(LLAMA2), "hi", "--raw", "--system", "x")
    assert result.returncode == 2 and "--system needs the chat template" in result.stderr


# --- where lines end ----------------------------------------------------------------------------


def _answering(tmp_path: Path, text: str) -> list[str]:
    """The `llamay run` command of an answer that is exactly `text` (a grammar allows only
    that), so that a test chooses whether it ends its line."""
    grammar = tmp_path / "answer.gbnf"
    grammar.write_text(f"root ::= {json.dumps(text)}\n")
    return [str(LLAMAY), "run", str(LLAMA2), "The license", "--raw", "--temp", "0",
            "--grammar-file", str(grammar)]  # fmt: skip


def _on_a_terminal(command: list[str], stderr: Any) -> bytes:
    """What `command` shows on a pseudo-terminal that is its stdout (and `stderr`, given
    "terminal"): every byte until it exits."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        command,
        stdout=terminal,
        stderr=terminal if stderr == "terminal" else stderr,
        stdin=subprocess.DEVNULL,
    )
    os.close(terminal)
    shown = b""
    with contextlib.suppress(OSError):  # EIO once the process has exited
        while chunk := os.read(controller, 4096):
            shown += chunk
    os.close(controller)
    assert process.wait(timeout=120) == 0, shown
    return shown


@pytest.mark.parametrize("answer", ["yes", "yes\n"])
def test_piped_apart_stdout_is_the_answer_byte_for_byte(tmp_path, answer):
    result = subprocess.run(_answering(tmp_path, answer), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == answer
    assert result.stderr.startswith("prompt ") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("answer", ["yes", "yes\n"])
def test_in_one_file_the_stats_start_a_line_of_their_own(tmp_path, answer):
    """`llamay run ... > log 2>&1`: the answer, then the stats on the next line, no blank."""
    log = tmp_path / "log"
    with open(log, "wb") as out:
        ran = subprocess.run(_answering(tmp_path, answer), stdout=out, stderr=subprocess.STDOUT)
    assert ran.returncode == 0
    lines = log.read_text().split("\n")
    assert lines[0] == "yes" and lines[1].startswith("prompt ") and lines[2:] == [""]


@pytest.mark.parametrize("answer", ["yes", "yes\n"])
def test_on_a_terminal_the_answer_ends_its_line_once(tmp_path, answer):
    shown = _on_a_terminal(_answering(tmp_path, answer), "terminal")
    assert shown.startswith(b"yes\r\nprompt ")  # no line shared, no blank line
    with open(tmp_path / "stats", "wb") as stats:
        alone = _on_a_terminal(_answering(tmp_path, answer), stats)
    assert alone == b"yes\r\n"
    assert (tmp_path / "stats").read_text().startswith("prompt ")


# --- the interactive chat ------------------------------------------------------------------------


def test_chat_answers_each_turn_and_continues_its_context(llama2):
    result = llamay_cli(
        "run",
        str(LLAMA2),
        "--temp",
        "0",
        "-n",
        "6",
        stdin="Hello\nWhat is a license?\n/bye\nignored\n",
    )
    assert result.returncode == 0, result.stderr
    # The first answer is the one-prompt answer; the second continues the same context: the
    # first turn's tokens, the generated ones, then only the new turn's tokens.
    messages = [{"role": "user", "content": "Hello"}]
    first_prompt = llama2.chat_template.render(messages)
    first_ids = chat_prompt_ids(llama2, first_prompt)
    first = generate(llama2, first_ids, max_tokens=6, temperature=0)
    first_tokens = list(first)
    first.context.close()
    decoder = llama2.tokenizer.stream()
    answer = "".join(decoder.feed(t) for t in first_tokens) + decoder.flush()
    messages += [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "What is a license?"},
    ]
    second_prompt = llama2.chat_template.render(messages)
    assert second_prompt.startswith(first_prompt + answer)  # the incremental path is taken
    new_turn = llama2.tokenize(second_prompt[len(first_prompt + answer) :], add_bos=False)
    second_answer = greedy_text(llama2, first_ids + first_tokens + new_turn, 6)
    assert result.stdout == answer + "\n" + second_answer + "\n"


def test_chat_ends_at_end_of_input():
    result = llamay_cli("run", str(QWEN2), "--temp", "0", "-n", "3", stdin="Hello\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") >= 1


def test_a_conversation_outgrowing_the_context_ends_with_one_error_line():
    turns = "".join(f"Tell me about clause {n} of the license\n" for n in range(8))
    result = llamay_cli("run", str(LLAMA2), "--temp", "0", "-n", "8", "-c", "48", stdin=turns)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    *meters, last = result.stderr.strip().splitlines()
    assert last.startswith("error: the conversation is ") and "the context holds 48" in last
    # each answered turn was followed by the context meter
    assert meters and all(re.fullmatch(r"\[\d+/48 tokens\]", line) for line in meters)
    assert result.stdout.endswith("\n")


def test_chat_fork_back_save_load_reset(tmp_path):
    """/fork and /back branch the conversation without disturbing it; /save then /reset and /load
    bring it back exactly: the next answer is the one an uninterrupted session gives."""
    snapshot = tmp_path / "chat.snap"
    chat = ["run", str(QWEN2), "--temp", "0", "-n", "8"]
    first = llamay_cli(*chat, stdin="Hello\n")
    straight = llamay_cli(*chat, stdin="Hello\nAnd then?\n")
    branched = llamay_cli(
        *chat,
        stdin=(
            f"Hello\n/fork\nTell me more\n/back\n/save {snapshot}\n/reset\n/load {snapshot}\n"
            "And then?\n/bye\n"
        ),
    )
    for result in (first, straight, branched):
        assert result.returncode == 0, result.stderr
    second_answer = straight.stdout[len(first.stdout) :]
    assert straight.stdout.startswith(first.stdout) and second_answer
    assert branched.stdout.startswith(first.stdout)
    assert branched.stdout.endswith(second_answer)
    for said in ("forked", "back to the conversation", "saved", "cleared", "loaded"):
        assert said in branched.stderr
    assert snapshot.is_file()


def test_chat_load_refuses_a_bad_snapshot_and_goes_on(tmp_path):
    bad = tmp_path / "bad.snap"
    bad.write_bytes(b"not a snapshot at all")
    result = llamay_cli("run", str(QWEN2), "--temp", "0", "-n", "4", stdin=f"/load {bad}\nHi\n")
    assert result.returncode == 0, result.stderr
    assert f"error: {bad}" in result.stderr
    assert result.stdout.strip()  # the chat went on and answered
