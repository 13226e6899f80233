"""The models a server has loaded: loaded on first use, kept for keep_alive, evicted LRU.

A request names a model by store name (`gemma3:270m`), by an alias from the config, or by the
path of a .gguf file under one of the config's model directories; names of one file share one
loaded model. A name spelled as a path anywhere else is refused by its spelling, before
anything is opened or even looked up (docs/security.md).

Loaded models share one memory budget (weights + KV budget each); loading one that does not fit
unloads the least recently used ones first. An unloaded model is not closed at once: requests
and contexts still on it keep it (it is "retiring"), and it is closed once nothing is left on
it. A retiring model still counts against the budget, and a request for it takes it back
rather than loading a second copy; when the budget is held by retiring models that open
contexts keep, a load is refused with 503 and Retry-After.
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
from llamay.server.errors import ApiError
from llamay.store import catalog, model_path, resolve_model
from llamay.store.builtin import PACKAGED
from llamay.store.names import looks_like_path, parse

# How often loaded models are checked for an expired keep_alive, and unloaded ones for idleness.
_REAP_INTERVAL_S = 1.0
# What a 503 for a full budget suggests: about when a context might have expired.
_RETRY_AFTER_S = 30
_DURATION = re.compile(r"(-?\d+(?:\.\d+)?) *(ms|s|m|h)?")
_MAX_DURATION_CHARS = 64
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclass
class LoadedModel:
    """One loaded model: the name it was asked for, its file, its size in bytes (weights + KV
    budget), when it was loaded and when it will be unloaded (inf: never); `label` names it in
    metrics: the name resolved (a store name as the store writes it, a path made absolute), so
    that spellings of one model do not make a series each."""

    name: str
    path: Path
    model: Model
    size: int
    loaded_at: float
    expires_at: float
    label: str = ""


def parse_keep_alive(value: float | int | str | None, default: float) -> float:
    """Seconds from a keep_alive given as a number of seconds or a duration ("5m", "30s", "1h",
    "-1"); None gives `default`; a negative value means forever (inf), and so does a number too
    large for any clock. LlamayError for anything else."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise LlamayError(f"keep_alive must be a duration such as '5m' or seconds, not {value!r}")
    if isinstance(value, str):
        # Stripped first, and matched by a pattern with no two ways to read one string: linear.
        text = value.strip()
        match = _DURATION.fullmatch(text) if len(text) <= _MAX_DURATION_CHARS else None
        if match is None:
            raise LlamayError(
                f"keep_alive must be a duration such as '5m', '30s' or '-1', not {value[:40]!r}"
            )
        value = float(match.group(1)) * _UNITS[match.group(2)]
    if value != value:  # NaN
        raise LlamayError("keep_alive must be a duration such as '5m' or seconds, not NaN")
    if value < 0:
        return math.inf
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float: as good as forever
        return math.inf


class ModelManager:
    """Thread-safe table of loaded models; see the module docstring."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.budget = config.memory_budget or _default_budget()
        # By file, least recently used first: two names of one file share one load.
        self._loaded: OrderedDict[Path, LoadedModel] = OrderedDict()
        # Unloaded models by file, closed once nothing runs on them (_close_idle), with how
        # many checks in a row found them idle.
        self._retiring: dict[Path, LoadedModel] = {}
        self._idle_checks: dict[Path, int] = {}
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
        serve; 503 when the memory budget is held by models that open contexts keep."""
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
            draft = self._draft_of(name)
            weights = path.stat().st_size + (draft.stat().st_size if draft else 0)
            with self._lock:
                self._make_room(weights)  # the weights at least, before loading
            model = llamay.load(
                path,
                threads=self.config.model_threads,
                n_ctx=self.config.n_ctx,
                kv_memory=self.config.kv_memory,
                kv_type=self.config.kv_type,
                lookup=self.config.lookup,
                draft=draft,
            )
            size = model.memory_bytes
            now = time.time()
            label = self._label(name, path)
            entry = LoadedModel(name, path, model, size, now, now + seconds, label)
            with self._lock:
                try:
                    self._make_room(size)
                except ApiError:
                    model.close()
                    raise
                self._loaded[path] = entry
        return model

    def _draft_of(self, name: str) -> Path | None:
        """The draft model file `--draft NAME=DRAFT` gives the model `name` (by the name a
        request used, or the name an alias points at), or None."""
        draft = self.config.drafts.get(name) or self.config.drafts.get(
            self.config.aliases.get(name, name)
        )
        return self.resolve(draft) if draft is not None else None

    def resolve(self, name: str) -> Path:
        """The .gguf file a request's model name stands for (ModelNotFound if none). A name
        spelled as a path must lie under a model directory; it is refused by its spelling
        alone otherwise, so that a client learns nothing of files elsewhere."""
        target = self.config.aliases.get(name, name)
        if looks_like_path(target):
            path = self.local_path(target)
            try:
                return resolve_model(path)
            except ModelNotFound as error:
                raise ModelNotFound(f"model {name!r} not found: {error}") from None
        try:
            return model_path(target)
        except ModelNotFound as error:
            raise ModelNotFound(f"model {name!r} not found: {error}") from None

    def local_path(self, name: str) -> Path:
        """The path a request spelled, if it lies under one of the model directories (by its
        spelling: ".." taken out, nothing looked up); ModelNotFound otherwise."""
        try:
            path = Path(os.path.abspath(Path(name).expanduser()))
        except (RuntimeError, ValueError):  # "~user" of no user, a NUL
            path = None
        if path is None or not any(_is_under(path, root) for root in self.config.model_dirs):
            raise ModelNotFound(
                f"{name[:200]}: this server serves model files only from its model directories "
                "(`llamay serve --models-dir DIR`)"
            )
        return path

    def available(self) -> dict[str, int]:
        """The names this server answers to (stored models, the built-in names that load here,
        aliases, loaded models, remote providers' models) with when each was made, in Unix
        seconds (0 where unknown)."""
        names = {name: 0 for name, packaged in PACKAGED.items() if packaged.loadable()}
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

    def label_of(self, model: Model) -> str:
        """The name metrics count `model` under (LoadedModel.label)."""
        with self._lock:
            for entry in [*self._loaded.values(), *self._retiring.values()]:
                if entry.model is model:
                    return entry.label
        return model.path.name

    def memory(self) -> dict[str, int]:
        """The budget, the bytes of it taken (loaded models, and retiring ones that something
        holds), and how many models are loaded and retiring."""
        with self._lock:
            return {
                "budget_bytes": self.budget,
                "held_bytes": self._held(),
                "models_loaded": len(self._loaded),
                "models_retiring": len(self._retiring),
            }

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
        """The loaded model of `path`, kept `seconds` from now; a retiring one comes back, so
        that a file is never loaded twice while something still holds its first copy."""
        entry = self._loaded.get(path)
        if entry is None and path in self._retiring:
            entry = self._loaded[path] = self._retiring.pop(path)
            self._idle_checks.pop(path, None)
        if entry is not None:
            entry.expires_at = time.time() + seconds
            self._loaded.move_to_end(path)
        return entry

    def _held(self) -> int:
        """The loaded models' bytes, and those of retiring models something still holds (an
        idle one is closed within seconds)."""
        return sum(e.size for e in self._loaded.values()) + sum(
            e.size for e in self._retiring.values() if e.model.busy
        )

    def _make_room(self, size: int) -> None:
        """Unloads least recently used models until `size` more bytes fit in the budget; 503
        when what is left is held by retiring models (open contexts keep them)."""
        while self._loaded and self._held() + size > self.budget:
            self._retire(self._loaded.popitem(last=False)[1])
        if self._held() + size > self.budget and any(e.model.busy for e in self._retiring.values()):
            raise ApiError(
                503,
                f"no room to load the model: the memory budget ({self.budget} bytes, "
                "--max-memory) is held by unloaded models that open contexts still use; "
                "delete those contexts, or retry once they expire",
                retry_after=_RETRY_AFTER_S,
            )

    def _retire(self, entry: LoadedModel) -> None:
        self._retiring[entry.path] = entry
        self._idle_checks[entry.path] = 0

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
        for path, entry in list(self._retiring.items()):
            idle = not entry.model.busy
            self._idle_checks[path] = self._idle_checks[path] + 1 if idle else 0
            if self._idle_checks[path] >= 2:
                del self._retiring[path], self._idle_checks[path]
                entry.model.close()

    def _label(self, name: str, path: Path) -> str:
        target = self.config.aliases.get(name, name)
        if looks_like_path(target):
            return str(path)
        try:
            return str(parse(target))
        except ModelNotFound:
            return path.name


def _is_under(path: Path, root: Path) -> bool:
    """Whether `path` lies in `root` once ".." is taken out (a symlink the directory's owner put
    there may point anywhere)."""
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(Path(root).expanduser()))


def _default_budget() -> int:
    """Three quarters of the machine's memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4
