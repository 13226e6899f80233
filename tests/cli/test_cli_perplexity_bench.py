"""`llamay perplexity` against llama.cpp's figures, and the shape of `llamay bench`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamay._core import _cpu

from helpers.clitools import run_llamay

DATA = Path(__file__).parent.parent / "data"
SYNTH = json.loads((DATA / "synth" / "reference.json").read_text())["files"]
GPL2 = DATA / "texts" / "gpl-2.txt"
GPL3 = DATA / "texts" / "gpl-3.txt"


llamay_cli = run_llamay


# --- perplexity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", SYNTH, ids=[entry["model"] for entry in SYNTH])
def test_perplexity_of_each_synthetic_model_is_llama_cpps_within_1_percent(entry):
    expected = entry["perplexity"]
    model = DATA / "synth" / entry["file"]
    result = llamay_cli(
        "perplexity", str(model), "-f", str(GPL2), "-c", "256", "-b", "256", "--json"
    )
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    assert set(measured) == {"ppl", "chunks", "tokens"}
    assert measured["tokens"] == measured["chunks"] * 127  # positions 128..254 predict 129..255
    assert measured["ppl"] == pytest.approx(expected["ppl"], rel=0.01)


def test_perplexity_prints_progress_per_chunk_and_the_result_last():
    model = DATA / "synth" / "llama2-spm-Q8_0.gguf"
    result = llamay_cli("perplexity", str(model), "-f", str(GPL2), "-c", "256")
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("PPL = ") and len(last.split(".")[-1]) == 4
    progress = result.stderr.strip().splitlines()[-1].rstrip(",").split(",")  # [1]x,[2]y,...
    assert [part.split("]")[0] for part in progress] == [
        f"[{i}" for i in range(1, len(progress) + 1)
    ]
    assert len(progress) > 1 and progress[-1].split("]")[1] == last.removeprefix("PPL = ")


def test_a_text_shorter_than_one_chunk_is_refused(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("This License applies to any program.\n", encoding="utf-8")
    model = DATA / "synth" / "llama2-spm-Q8_0.gguf"
    result = llamay_cli("perplexity", str(model), "-f", str(short), "-c", "256")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {short}: ")
    assert "fewer than one chunk of 256" in lines[0]


def test_gemma_perplexity_on_the_gpl3_is_llama_cpps_within_1_percent(gemma_path):
    result = llamay_cli("perplexity", "gemma3:270m", "-f", str(GPL3), "-c", "512", "--json")
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    assert measured["chunks"] == 14
    assert measured["ppl"] == pytest.approx(13.9062, rel=0.01)


# --- bench ---------------------------------------------------------------------------------------


def test_bench_json_has_one_row_per_thread_count():
    model = DATA / "synth" / "qwen2-Q8_0.gguf"
    result = llamay_cli(
        "bench", str(model), "-p", "32", "-n", "8", "--threads", "1,2", "--repeat", "1", "--json"
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["threads"] for row in rows] == [1, 2]
    for row in rows:
        assert set(row) == {
            "threads",
            "prefill_tps",
            "decode_tps",
            "prompt_tokens",
            "gen_tokens",
            "kernels",
        }
        assert row["kernels"] == _cpu.best_kernel_set()
        assert (row["prompt_tokens"], row["gen_tokens"]) == (32, 8)
        assert row["prefill_tps"] > 0 and row["decode_tps"] > 0


def test_bench_depth_decodes_after_that_many_prompt_tokens():
    model = DATA / "synth" / "qwen2-Q8_0.gguf"
    result = llamay_cli(
        "bench",
        str(model),
        "-p",
        "8",
        "-n",
        "4",
        "-d",
        "40",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["depth"] == 40 and row["gen_tokens"] == 4 and row["decode_tps"] > 0
    table = llamay_cli("bench", str(model), "-p", "8", "-n", "4", "-d", "40", "--repeat", "1")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1].split()[-2:] == ["@", "40"]


def test_bench_sequences_decode_at_once_each_after_its_own_depth():
    """Six sequences after 40 tokens each, their forks and a prefill's context: more than the
    default KV cache's four contexts, so the cache is sized for them."""
    model = DATA / "synth" / "qwen2-Q8_0.gguf"
    args = ["bench", str(model), "-p", "8", "-n", "4", "-d", "40", "-s", "6", "--repeat", "1"]
    result = llamay_cli(*args, "--threads", "1", "--kv-type", "q8_0", "--json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert (row["sequences"], row["depth"], row["kv_type"]) == (6, 40, "Q8_0")
    assert row["gen_tokens"] == 4 and row["decode_tps"] > 0
    table = llamay_cli(*args, "--threads", "2")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1].split()[-3:] == ["x6", "@", "40"]
    refused = llamay_cli("bench", str(model), "-s", "0")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_bench_refuses_a_depth_past_the_context():
    model = DATA / "synth" / "qwen2-Q8_0.gguf"
    result = llamay_cli("bench", str(model), "-n", "4", "-d", "100000000", "--repeat", "1")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr


def test_bench_table_names_its_columns():
    model = DATA / "synth" / "qwen2-Q8_0.gguf"
    result = llamay_cli(
        "bench", str(model), "-p", "16", "-n", "4", "--threads", "1", "--repeat", "1"
    )
    assert result.returncode == 0, result.stderr
    kernels, header, row = result.stdout.strip().splitlines()
    assert kernels.startswith(f"kernels {_cpu.best_kernel_set()} (best of ")
    assert header.split() == ["threads", "prefill", "16", "t/s", "decode", "4", "t/s"]
    assert row.split()[0] == "1" and len(row.split()) == 3


@pytest.mark.parametrize("threads", ["0", "1,x", ""])
def test_bench_refuses_bad_thread_lists(threads):
    model = DATA / "synth" / "qwen2-Q8_0.gguf"
    result = llamay_cli("bench", str(model), "--threads", threads)
    assert result.returncode == 2 and "comma-separated list of positive integers" in result.stderr
