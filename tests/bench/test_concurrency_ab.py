"""bench/concurrency_ab.py runs bench_concurrency.py from two builds in turn and compares their
aggregate decode through generate."""

from __future__ import annotations

import json
from functools import partial

from helpers.bench_scripts import BUILT, run_script

run = partial(run_script, "concurrency_ab.py", timeout=900)


def test_a_build_against_itself_reports_each_count(gemma_path):
    done = run(
        str(BUILT), str(BUILT), "--model", str(gemma_path), "--threads", "1",
        "--concurrency", "1,2", "--max-tokens", "6", "--runs", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["threads"] == 1
    assert [row["sequences"] for row in report["rows"]] == [1, 2]
    for row in report["rows"]:
        assert row["a_tps"] > 0 and row["b_tps"] > 0 and len(row["ratios"]) == 2


def test_a_checkout_without_a_build_is_refused(tmp_path):
    done = run(str(tmp_path), str(BUILT))
    assert done.returncode != 0
    assert "no built llamay/_core/engine module" in done.stderr
    assert "Traceback" not in done.stderr
