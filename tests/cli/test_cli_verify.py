"""`llamay verify`: one PASS/FAIL line per check and a summary, or --json; exit 1 on a bad MODEL."""

from __future__ import annotations

import json

from llamay._core import _cpu
from llamay.verify import DECODE, SEQUENCE

from helpers.clitools import assert_user_error, run_llamay

CHECKS = 9


def test_verify_without_a_model_passes_every_check_on_the_builtin_one():
    result = run_llamay("verify")
    assert result.returncode == 0, result.stderr
    head, *lines = result.stdout.splitlines()
    # which code ran, on which CPU: what a report of a failure needs
    assert head.startswith(f"kernels {_cpu.best_kernel_set()} (best of ")
    assert len(lines) == CHECKS + 1
    assert all(line.startswith("PASS  ") for line in lines[:CHECKS])
    assert lines[0].startswith("PASS  thread counts (1, ")
    # the sequence, then a deep one past two spans: its last prompt position and decode steps
    assert lines[0].endswith(f"max |Δlogit| = 0 over {SEQUENCE + 1 + DECODE} positions")
    assert lines[CHECKS - 1].startswith(
        f"PASS  kernel sets ({', '.join(_cpu.usable_kernel_sets())})"
    )
    assert lines[-1].startswith(f"{CHECKS} of {CHECKS} checks passed (built-in synthetic model, ")


def test_verify_json_gives_each_check_with_its_figures():
    result = run_llamay("verify", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["model"] == "built-in synthetic model" and report["passed"] is True
    assert report["system"]["kernels"] == _cpu.best_kernel_set()
    assert report["system"]["features"] == _cpu.features()
    assert len(report["checks"]) == CHECKS
    for check in report["checks"]:
        assert {"name", "passed", "figure", "seconds"} <= set(check)
        assert check["passed"] is True
    assert [c["max_abs_diff"] for c in report["checks"][:5]] == [0.0] * 5


def test_verify_of_a_missing_model_is_a_user_error(tmp_path):
    assert_user_error(
        run_llamay("verify", str(tmp_path / "nope.gguf")), "nope.gguf", "no such file"
    )


def test_verify_passes_on_gemma3_270m(gemma_path):
    result = run_llamay("verify", "gemma3:270m", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["model"] == "gemma3:270m" and report["passed"] is True
    assert all(check["passed"] for check in report["checks"])
