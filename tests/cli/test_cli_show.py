"""`llamay show` and the CLI's error contract, through the real console entry point."""

from __future__ import annotations

import json
import os

from llamay._core import _cpu

from helpers.clitools import assert_user_error, run_llamay


def test_show_json_lists_every_tensor(gemma_path):
    result = run_llamay("show", "gemma3:270m", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    tensors = shown["tensors"]
    assert len(tensors) == 236
    counts: dict[str, int] = {}
    for t in tensors:
        counts[t["type"]] = counts.get(t["type"], 0) + 1
        assert set(t) == {"name", "type", "shape", "offset"}
    assert counts == {"F32": 109, "Q5_0": 81, "Q4_K": 27, "Q8_0": 10, "Q6_K": 9}
    embd = next(t for t in tensors if t["name"] == "token_embd.weight")
    assert embd["shape"] == [640, 262144] and embd["type"] == "Q8_0"
    assert shown["metadata"]["general.architecture"] == "gemma3"
    assert len(shown["metadata"]["tokenizer.ggml.tokens"]) == 262144


def test_show_plain(gemma_path):
    result = run_llamay("show", str(gemma_path))
    assert result.returncode == 0, result.stderr
    assert "gemma3.block_count" in result.stdout
    assert "blk.0.attn_q.weight" in result.stdout


def test_truncated_file(tmp_path, data_dir):
    raw = (data_dir / "synth" / "qwen2-Q8_0.gguf").read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(raw[: len(raw) // 2])
    assert_user_error(run_llamay("show", str(path)), str(path), "truncated")


def test_wrong_magic(tmp_path):
    path = tmp_path / "notes.gguf"
    path.write_text("hello, I am not a model\n")
    assert_user_error(run_llamay("show", str(path)), str(path), "not a GGUF file")


def test_directory(tmp_path):
    assert_user_error(run_llamay("show", str(tmp_path)), str(tmp_path), "directory")


def test_missing_path(tmp_path):
    missing = tmp_path / "missing.gguf"
    assert_user_error(run_llamay("show", str(missing)), str(missing), "no such file")


def test_unknown_store_name():
    assert_user_error(run_llamay("show", "no-such-model:7b"), "no-such-model:7b", "gemma3:270m")


def test_usage_error_exits_2():
    result = run_llamay("show")
    assert result.returncode == 2
    assert "Missing argument" in result.stderr


def test_system_names_the_cpu_and_the_kernel_set_in_use():
    result = run_llamay("show", "--system")
    assert result.returncode == 0, result.stderr
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines())
    assert rows["kernels"] == f"{_cpu.best_kernel_set()} (the best this CPU runs)"
    assert rows["built"] == ", ".join(_cpu.kernel_sets())
    assert rows["runs"] == ", ".join(_cpu.usable_kernel_sets())
    assert rows["features"].split() == _cpu.features()
    assert rows["cpu"].endswith(f"({_cpu.cpu_count()} CPUs for this process)")
    forced = run_llamay(
        "show", "--system", "--json", env={**os.environ, "LLAMAY_KERNELS": "reference"}
    )
    info = json.loads(forced.stdout)
    assert (info["kernels"], info["kernels_forced"]) == ("reference", True)
    assert info["runs"] == _cpu.usable_kernel_sets()


def test_system_reports_a_kernel_set_the_cpu_cannot_run():
    foreign = "avx2" if "neon" in _cpu.kernel_sets() else "neon"
    info = json.loads(
        run_llamay(
            "show", "--system", "--json", env={**os.environ, "LLAMAY_KERNELS": foreign}
        ).stdout
    )
    assert info["kernels"] is None and f"no kernel set '{foreign}'" in info["kernels_error"]
    both = run_llamay("show", "gemma3:270m", "--system")
    assert both.returncode == 2 and "either MODEL or --system" in both.stderr
