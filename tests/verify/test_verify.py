"""The determinism checks of `llamay verify` as a library: they pass on the built-in model, and
they fail when the logits they compare differ."""

from __future__ import annotations

import numpy as np
import pytest

import llamay
from llamay._core import _cpu
from llamay.models.synthetic import write_builtin
from llamay.verify import (
    DECODE,
    KERNEL_SET_TOKENS,
    N_CTX,
    PAGE_TOKENS,
    SEQUENCE,
    check_thread_counts,
    compare_logits,
    run_checks,
    token_stream,
)

from helpers import families


def test_the_builtin_model_is_the_same_file_every_time_and_another_seed_changes_it(tmp_path):
    first = write_builtin(tmp_path / "a.gguf").read_bytes()
    assert write_builtin(tmp_path / "b.gguf").read_bytes() == first
    assert write_builtin(tmp_path / "c.gguf", seed=1).read_bytes() != first


def test_the_builtin_model_tokenizes_any_text_through_its_byte_tokens(tmp_path):
    model = llamay.load(write_builtin(tmp_path / "m.gguf"))
    text = "the Ünïcode ✓ 🦙"
    ids = model.tokenize(text, add_bos=False)
    assert model.detokenize(ids) == text
    assert len(set(ids)) > 5 and max(ids) < model.n_vocab


def test_every_check_passes_on_the_builtin_model():
    threads = ", ".join(map(str, sorted({1, 2, _cpu.cpu_count()})))
    checks = list(run_checks())
    assert [check.name for check in checks] == [
        f"thread counts ({threads})",
        "batch company (alone, beside 3 others)",
        "prefill (whole, chunked, token by token)",
        "fork continuation vs cold",
        "snapshot round trip",
        "seeded sampling",
        "prompt lookup (on, off)",
        "draft model (on, off)",
        f"kernel sets ({', '.join(_cpu.usable_kernel_sets())})",
    ]
    assert all(check.passed for check in checks), checks
    for check in checks[:5]:
        assert check.numbers["max_abs_diff"] == 0.0
        assert check.numbers["positions"] >= SEQUENCE - 30
        assert check.figure.startswith("max |Δlogit| = 0 over ")
    assert checks[3].numbers["prefix_reused"]
    snapshot = checks[4].numbers
    assert (
        snapshot["tokens_equal"] and snapshot["samples_equal"] and snapshot["other_weights_refused"]
    )
    assert checks[5].numbers == {
        "runs": 4,
        "tokens": 32,
        "other_seed_differs": True,
        "seconds": checks[5].numbers["seconds"],
    }
    drafted = checks[7].numbers
    assert drafted["identical"] and drafted["accepted"] > 0
    assert drafted["proposed"] > drafted["accepted"]  # other weights: some drafts refused
    sets = checks[8].numbers
    assert sets["max_abs_diff"] == 0.0
    assert sets["positions"] == KERNEL_SET_TOKENS * (len(_cpu.usable_kernel_sets()) - 1)


def test_compare_logits_fails_on_one_ulp_a_shape_or_a_nan():
    expected = np.linspace(-3, 3, 40, dtype=np.float32).reshape(4, 10)
    assert compare_logits("same", [(expected, expected.copy())]).passed
    nudged = expected.copy()
    nudged[2, 7] = np.nextafter(nudged[2, 7], np.float32(np.inf))
    check = compare_logits("ulp", [(expected, expected), (expected, nudged)])
    assert not check.passed
    assert check.numbers == {
        "max_abs_diff": float(abs(nudged[2, 7] - expected[2, 7])),
        "positions": 8,
    }
    assert check.figure == f"max |Δlogit| = {check.numbers['max_abs_diff']:g} over 8 positions"
    shorter = compare_logits("shape", [(expected, expected[:3])])
    assert not shorter.passed and shorter.numbers["max_abs_diff"] is None
    nan = expected.copy()
    nan[0, 0] = np.nan
    assert not compare_logits("nan", [(expected, nan)]).passed


def test_the_thread_check_fails_on_models_that_compute_other_bits(tmp_path):
    """Two loads that differ in KV precision stand in for two thread counts that disagree."""
    path = write_builtin(tmp_path / "m.gguf")
    models = {
        k: llamay.load(path, threads=1, n_ctx=N_CTX, page_tokens=PAGE_TOKENS, kv_type=kv)
        for k, kv in ((1, "F16"), (2, "F32"))
    }
    check = check_thread_counts("threads", models, token_stream(models[1], SEQUENCE))
    assert not check.passed
    assert 0 < check.numbers["max_abs_diff"] < 1
    # the sequence's positions, then the deep one's last prompt position and decode steps
    assert check.numbers["positions"] == SEQUENCE + 1 + DECODE


@pytest.mark.parametrize(
    "name", ["qwen3moe-Q4_K_M", "gpt-oss-MXFP4_MOE", "mixtral-Q8_0", "cohere2-F16"]
)
def test_every_check_passes_on_the_new_families(tmp_path, name):
    """Mixture-of-experts models too: a token's logits do not depend on which other tokens share
    its step or which experts they chose (batch company, prefill shapes), nor on the threads."""
    path = families.model_file(name, tmp_path)
    checks = list(run_checks(path))
    assert len(checks) == 8  # no draft check on a model without --draft
    assert all(check.passed for check in checks), checks
    for check in [*checks[:5], checks[7]]:
        assert check.numbers["max_abs_diff"] == 0.0
