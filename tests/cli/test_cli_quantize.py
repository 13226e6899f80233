"""`llamay quantize` through the real console script: llama-quantize's bytes, one-line errors,
store names in and out, and Ctrl-C that leaves nothing behind."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import numpy as np
import pytest

from llamay import gguf, store
from llamay.gguf.format import ValueType
from llamay.gguf.writer import Typed
from llamay.models import synthetic

from helpers.clitools import LLAMAY, assert_user_error, default_sigint, run_llamay

DATA = Path(__file__).parent.parent / "data"
QUANTIZE = DATA / "quantize"
REFERENCE = json.loads((QUANTIZE / "reference.json").read_text())


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """The reference's llama model in F16, as llama-quantize was given it."""
    model = REFERENCE["models"]["llama"]
    recipe = dict(model["recipe"])
    vocab = {
        k: v
        for k, v in gguf.read(DATA / "synth" / "llama2-spm-Q8_0.gguf").metadata.items()
        if k.startswith("tokenizer.")
    }
    path = tmp_path_factory.mktemp("llama") / "llama-F16.gguf"
    synthetic.write_model(path, recipe.pop("arch"), vocab, **recipe)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model["sha256"]
    return path


def reference(type_name: str, imatrix: str | None) -> dict:
    return next(
        r for r in REFERENCE["results"]
        if (r["model"], r["type"], r["imatrix"]) == ("llama", type_name, imatrix)
    )  # fmt: skip


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_writes_llama_quantizes_file(llama, tmp_path, monkeypatch):
    monkeypatch.chdir(QUANTIZE)  # the importance matrix by the name llama-quantize was given
    out = tmp_path / "q.gguf"
    result = run_llamay(
        "quantize", str(llama), str(out), "q4_k_m", "--imatrix", "imatrix-llama.gguf"
    )
    assert result.returncode == 0, result.stderr
    assert sha256(out) == reference("Q4_K_M", "imatrix-llama.gguf")["sha256"]
    assert result.stdout == ""
    assert "\r" not in result.stderr  # no progress bar when piped
    assert result.stderr.startswith(f"quantized {llama} to {out} (Q4_K_M): ")
    legacy = run_llamay(
        "quantize", str(llama), str(out), "Q2_K", "--imatrix", "imatrix-llama.dat", "--threads", "1"
    )
    assert legacy.returncode == 0, legacy.stderr
    assert sha256(out) == reference("Q2_K", "imatrix-llama.dat")["sha256"]


def test_user_mistakes_are_one_line_errors(llama, tmp_path):
    # (the refusals themselves: tests/gguf/test_quantize_*.py; here, that each is one line)
    out = str(tmp_path / "out.gguf")
    assert_user_error(
        run_llamay("quantize", str(llama), out, "IQ2_XS"), "does not write IQ2_XS files"
    )
    assert_user_error(
        run_llamay("quantize", str(llama), out, "Q4_K_M", "--imatrix", str(tmp_path / "no.dat")),
        "no.dat: no such file",
    )
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(llama.read_bytes()[: llama.stat().st_size // 2])
    assert_user_error(run_llamay("quantize", str(cut), out, "Q8_0"), "cut.gguf", "truncated")
    q8 = tmp_path / "q8.gguf"
    assert run_llamay("quantize", str(llama), str(q8), "Q8_0").returncode == 0
    assert_user_error(
        run_llamay("quantize", str(q8), out, "Q4_0"), "is already Q8_0", "--allow-requantize"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.gguf", "q8.gguf"]


def test_store_names_in_and_out(llama, tmp_path):
    made = run_llamay("quantize", str(llama), "quant-test", "Q8_0")
    assert made.returncode == 0, made.stderr
    assert "to quant-test:latest (Q8_0)" in made.stderr
    entry = store.model_info("quant-test")
    assert entry.quant == "Q8_0"
    assert sha256(entry.path) == next(
        r["sha256"]
        for r in REFERENCE["results"]
        if (r["model"], r["type"], r["imatrix"]) == ("llama", "Q8_0", None)
    )
    store.create(
        "quant-chat", from_="quant-test", template="{{ .Prompt }}", params={"temperature": 0.2}
    )
    # a stored source: its template and parameters go with the quantized copy
    again = run_llamay("quantize", "quant-chat", "quant-chat-q4", "Q4_0", "--allow-requantize")
    assert again.returncode == 0, again.stderr
    copy = store.model_info("quant-chat-q4")
    assert (copy.quant, copy.template, copy.params) == (
        "Q4_0",
        "{{ .Prompt }}",
        {"temperature": 0.2},
    )
    out = tmp_path / "from-store.gguf"
    assert run_llamay("quantize", "quant-test", str(out), "Q8_0").returncode == 0
    assert out.read_bytes() == entry.path.read_bytes()  # nothing to convert: copied
    for name in ("quant-test", "quant-chat", "quant-chat-q4"):
        store.remove(name)


def test_a_progress_bar_on_a_terminal(llama, tmp_path):
    controller, terminal = pty.openpty()
    # a terminal of 80 columns: a new pseudo-terminal has none, and tqdm draws into none
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen(
        [str(LLAMAY), "quantize", str(llama), str(tmp_path / "q.gguf"), "Q8_0"],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=120) == 0
    assert b"Q8_0:" in shown and b"\r" in shown  # tqdm's bar, redrawn in place
    assert b"quantized " in shown


def test_ctrl_c_leaves_no_output(tmp_path):
    meta = {"general.architecture": "llama", "llama.block_count": Typed(1, ValueType.UINT32)}
    rng = np.random.default_rng(0)
    tensors = {
        f"blk.0.ffn_{role}.weight": rng.standard_normal((2048, 4096), np.float32).astype(np.float16)
        for role in ("up", "gate", "down")
    }
    model = gguf.write(tmp_path / "big.gguf", meta, tensors)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    process = subprocess.Popen(
        [str(LLAMAY), "quantize", str(model), str(out_dir / "q.gguf"), "Q2_K", "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 120
    while not any(out_dir.iterdir()) and time.monotonic() < deadline:  # writing has begun
        time.sleep(0.01)
    assert process.poll() is None, process.stderr.read()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr and "q.gguf was not written" in stderr
    assert list(out_dir.iterdir()) == []
    assert os.path.exists(model)
