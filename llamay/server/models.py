"""The models a server has loaded: loaded on first use, kept for keep_alive, evicted LRU.

A request names a model by store name (`gemma3:270m`), by an alias from the config, or by the
path of a .gguf file under one of the config's model directories; names of one file share one
loaded model. Loaded models share one
memory budget (weights + KV budget each); loading one that does not fit unloads the least
recently used ones first. An unloaded model is not closed at once: requests already running on
it finish, and it is closed once no sequence is left on it.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import llamay
from llamay.engine import Model
from llamay.errors import LlamayError, ModelNotFound
from llamay.providers import load_providers
from llamay.server.config import ServerConfig
from llamay.store import catalog, resolve_model
from llamay.store.builtin import PACKAGED

# How often loaded models are checked for an expired keep_alive, and unloaded ones for idleness.
_REAP_INTERVAL_S = 1.0
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclass
class LoadedModel:
    """One loaded model: the name it was asked for, its file, its size in bytes (weights + KV
    budget), when it was loaded and when it will be unloaded (inf: never)."""

    name: str
    path: Path
    model: Model
    size: int
    loaded_at: float
    expires_at: float


def parse_keep_alive(value: float | int | str | None, default: float) -> float:
    """Seconds from a keep_alive given as a number of seconds or a duration ("5m", "30s", "1h",
    "-1"); None gives `default`; a negative value means forever (inf)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise LlamayError(f"keep_alive must be a duration such as '5m' or seconds, not {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if match is None:
            raise LlamayError(
                f"keep_alive must be a duration such as '5m', '30s' or '-1', not {value!r}"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    return math.inf if seconds < 0 else seconds


class ModelManager:
    """Thread-safe table of loaded models; see the module docstring."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.budget = config.memory_budget or _default_budget()
        # By file, least recently used first: two names of one file share one load.
        self._loaded: OrderedDict[Path, LoadedModel] = OrderedDict()
        # Unloaded models, closed once no sequence runs on them (_close_idle).
        self._retiring: dict[Model, int] = {}
        self._lock = threading.Lock()
        # Loading takes seconds: one load at a time, outside the table lock.
        self._load_lock = threading.Lock()
        self._reaper = threading.Thread(
            target=self._reap_forever, name="llamay-reaper", daemon=True
        )
        self._reaper.start()

    def get(self, name: str, keep_alive: float | str | None = None) -> Model:
        """The model `name` names, loading it if needed, kept `keep_alive` from now (seconds or
        a duration; None: the config's). ModelNotFound when it names no model this server may
        serve."""
        seconds = parse_keep_alive(keep_alive, self.config.keep_alive)
        path = self.resolve(name)
        with self._lock:
            entry = self._touch(path, seconds)
        if entry is not None:
            return entry.model
        with self._load_lock:
            with self._lock:
                entry = self._touch(path, seconds)
            if entry is not None:
                return entry.model
            model = llamay.load(
                path,
                threads=self.config.model_threads,
                n_ctx=self.config.n_ctx,
                kv_memory=self.config.kv_memory,
            )
            stats = model.kv_stats()
            size = path.stat().st_size + stats["pages_total"] * stats["bytes_per_page"]
            now = time.time()
            entry = LoadedModel(name, path, model, size, now, now + seconds)
            with self._lock:
                self._make_room(size)
                self._loaded[path] = entry
        return model

    def resolve(self, name: str) -> Path:
        """The .gguf file a request's model name stands for (ModelNotFound if none)."""
        target = self.config.aliases.get(name, name)
        try:
            path = Path(target).expanduser()
        except RuntimeError:  # "~user/..." for a user with no home directory
            raise ModelNotFound(f"model {name!r} not found: no such home directory") from None
        is_path = target.endswith(".gguf") or target.startswith(("/", ".", "~")) or path.exists()
        if is_path and not any(_is_under(path, root) for root in self.config.model_dirs):
            raise ModelNotFound(
                f"{name}: this server serves model files only from its model directories "
                "(`llamay serve --models-dir DIR`)"
            )
        try:
            return resolve_model(target)
        except ModelNotFound as error:
            raise ModelNotFound(f"model {name!r} not found: {error}") from None

    def available(self) -> dict[str, int]:
        """The names this server answers to (stored models, built-in names, aliases, loaded
        models, remote providers' models) with when each was made, in Unix seconds (0 where
        unknown)."""
        names = {name: 0 for name in PACKAGED}
        for entry in catalog.list_models():
            names[entry.name] = int(entry.modified.timestamp())
        for alias, target in self.config.aliases.items():
            names[alias] = names.get(target, 0)
        for entry in self.loaded():
            names.setdefault(entry.name, int(entry.loaded_at))
        for provider in load_providers():
            names.update(dict.fromkeys(provider.models, 0))
        return dict(sorted(names.items()))

    def loaded(self) -> list[LoadedModel]:
        """The loaded models, least recently used first."""
        with self._lock:
            return list(self._loaded.values())

    def loaded_models(self) -> dict[str, Model]:
        """Each loaded model by the name it was loaded under."""
        with self._lock:
            return {entry.name: entry.model for entry in self._loaded.values()}

    def unload(self, name: str) -> bool:
        """Unload the model `name` names, or was loaded under (it may be gone from the store
        by now); False if it was not loaded."""
        try:
            path: Path | None = self.resolve(name)
        except ModelNotFound:
            path = None
        with self._lock:
            keys = [p for p, entry in self._loaded.items() if p == path or entry.name == name]
            for key in keys:
                self._retire(self._loaded.pop(key))
        return bool(keys)

    def _touch(self, path: Path, seconds: float) -> LoadedModel | None:
        entry = self._loaded.get(path)
        if entry is not None:
            entry.expires_at = time.time() + seconds
            self._loaded.move_to_end(path)
        return entry

    def _make_room(self, size: int) -> None:
        while self._loaded and sum(e.size for e in self._loaded.values()) + size > self.budget:
            self._retire(self._loaded.popitem(last=False)[1])

    def _retire(self, entry: LoadedModel) -> None:
        self._retiring[entry.model] = 0

    def _reap_forever(self) -> None:
        while True:
            time.sleep(_REAP_INTERVAL_S)
            now = time.time()
            with self._lock:
                for path in [p for p, e in self._loaded.items() if e.expires_at <= now]:
                    self._retire(self._loaded.pop(path))
                self._close_idle()

    def _close_idle(self) -> None:
        """Close retired models that nothing uses any more (no open context, no running
        generation), seen on two checks in a row, a second apart: a request that took the
        model just before it was retired has had time to open its context."""
        for model, idle_checks in list(self._retiring.items()):
            idle = not model.busy
            self._retiring[model] = idle_checks + 1 if idle else 0
            if self._retiring[model] >= 2:
                del self._retiring[model]
                model.close()


def _is_under(path: Path, root: Path) -> bool:
    """Whether `path` lies in `root` once ".." is taken out (a symlink the directory's owner put
    there may point anywhere)."""
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(Path(root).expanduser()))


def _default_budget() -> int:
    """Three quarters of the machine's memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4
