"""docs/matrix.md is rendered from bench/matrix.json and tests/data, and says when it is stale.

The recomputation itself (`python bench/matrix.py --check`, which measures llamay again on the
synth models and on Gemma) runs in .ci/run; these tests hold the parts that need no model."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix():
    spec = importlib.util.spec_from_file_location("bench_matrix", ROOT / "bench" / "matrix.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_matrix"] = module
    spec.loader.exec_module(module)
    return module


def test_the_page_is_what_the_record_and_the_test_data_give(matrix):
    assert matrix.PAGE.read_text() == matrix.render(matrix.load_record()), (
        "docs/matrix.md is stale: run python bench/matrix.py --render (or measure again)"
    )


def test_every_recorded_measurement_names_its_command_machine_date_and_commit(matrix):
    for key, record in matrix.load_record()["measurements"].items():
        for field in ("command", "machine", "date", "commit"):
            assert record[field], f"{key} has no {field}"


def test_no_recorded_measurement_comes_from_other_test_data(matrix):
    assert matrix.stale_inputs(matrix.load_record()) == []


def test_a_changed_reference_makes_what_was_measured_from_it_stale(matrix):
    record = copy.deepcopy(matrix.load_record())
    key = next(k for k in record["measurements"] if k.startswith("families/"))
    record["measurements"][key]["inputs"] = "0" * 64
    assert matrix.stale_inputs(record) == [key]


def test_a_missing_measurement_shows_as_not_measured_and_cites_no_run(matrix):
    record = copy.deepcopy(matrix.load_record())
    page = matrix.render(record)
    key = next(k for k in record["measurements"] if k.startswith("synth/"))
    del record["measurements"][key]
    thinner = matrix.render(record)
    assert (
        thinner != page and thinner.count("not measured yet") == page.count("not measured yet") + 1
    )
    assert thinner.count("(#run-") == page.count("(#run-") - 1
