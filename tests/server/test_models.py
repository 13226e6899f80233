"""The server's model table: loaded on first use, kept for keep_alive, evicted LRU."""

from __future__ import annotations

import math
import time

import pytest

from llamay.errors import LlamayError, ModelNotFound
from llamay.server.config import ServerConfig
from llamay.server.models import ModelManager, parse_keep_alive

from helpers.waiting import wait_until

SMALL = {"n_ctx": 128, "kv_memory": "4MiB", "model_threads": 1}


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(None, 300.0), (0, 0.0), (12.5, 12.5), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0),
     ("250ms", 0.25), (-1, math.inf), ("-1", math.inf), ("-5m", math.inf)],
)  # fmt: skip
def test_keep_alive_durations(given, seconds):
    assert parse_keep_alive(given, 300.0) == seconds


@pytest.mark.parametrize("given", ["soon", "5 minutes", True, "1d"])
def test_bad_keep_alive(given):
    with pytest.raises(LlamayError, match="keep_alive"):
        parse_keep_alive(given, 300.0)


def test_loaded_once_and_kept(gemma_path):
    manager = ModelManager(ServerConfig(**SMALL))
    model = manager.get("gemma3:270m")
    used = time.time()
    assert manager.get("gemma3:270m") is model
    used_again = time.time()
    [entry] = manager.loaded()
    assert entry.name == "gemma3:270m" and entry.path.name == gemma_path.name
    assert entry.size > gemma_path.stat().st_size
    assert used + 300 <= entry.expires_at <= used_again + 300  # kept 300 s from its last use
    assert manager.loaded_models() == {"gemma3:270m": model}
    assert manager.unload("gemma3:270m") and manager.loaded() == []
    assert not manager.unload("gemma3:270m")


def test_keep_alive_zero_unloads_after_use(gemma_path):
    manager = ModelManager(ServerConfig(**SMALL))
    manager.get("gemma3:270m", keep_alive=0)
    wait_until(lambda: not manager.loaded(), 60, "the model stayed loaded")


def test_names_of_one_file_share_one_load(gemma_path):
    manager = ModelManager(ServerConfig(**SMALL, aliases={"mine": "gemma3:270m"}))
    assert manager.get("mine") is manager.get("gemma3:270m")
    assert [entry.name for entry in manager.loaded()] == ["mine"]


def test_least_recently_used_is_evicted_past_the_budget(gemma_path, tmp_path):
    for name in ("first", "second", "third"):  # three files, as far as the table can tell
        (tmp_path / f"{name}.gguf").symlink_to(gemma_path)
    aliases = {name: str(tmp_path / f"{name}.gguf") for name in ("first", "second", "third")}
    config = {**SMALL, "aliases": aliases, "model_dirs": (tmp_path,)}
    probe = ModelManager(ServerConfig(**config))
    probe.get("first")
    one = probe.loaded()[0].size
    manager = ModelManager(ServerConfig(**config, memory_budget=2 * one + 1))
    first = manager.get("first")
    second = manager.get("second")
    manager.get("first")  # now "second" is the least recently used
    manager.get("third")
    assert [entry.name for entry in manager.loaded()] == ["first", "third"]
    # the evicted model, with no sequence on it, is closed after two checks a second apart
    wait_until(lambda: manager.memory()["models_retiring"] == 0, 60, "the evicted model is open")
    with pytest.raises(LlamayError, match="model is closed"):
        list(second.generate("hi", max_tokens=1))
    assert len(list(first.generate("hi", max_tokens=1))) == 1


def test_paths_only_from_the_model_dirs(gemma_path, tmp_path):
    outside = ModelManager(ServerConfig(**SMALL))
    with pytest.raises(ModelNotFound, match="--models-dir"):
        outside.resolve(str(gemma_path))
    inside = ModelManager(ServerConfig(**SMALL, model_dirs=(gemma_path.parent,)))
    assert inside.resolve(str(gemma_path)) == gemma_path
    with pytest.raises(ModelNotFound, match="nope:1b"):
        inside.resolve("nope:1b")
