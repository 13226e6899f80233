"""Slots: llama-server's places for a model's prompt cache, as llamay keeps them.

llama-server runs a fixed number of sequences (`--parallel`), each keeping the KV of its last
request for the next one. llamay's scheduler has no such places: it batches any number of
sequences, and the prefix tree shares computed pages between all of them. So a slot here is
a numbered record, per loaded model (`--slots` of them), of what its last request's context
held: the prompt and the generated tokens, whose pages the prefix tree keeps while it has
room. /completion and /infill run in a slot (the one `id_slot` names, or the idle one whose
tokens share the longest prefix with the prompt); when every slot is busy a request runs
without one (`id_slot` -1 in its answer), batched like any other.

Saving a slot writes a snapshot of a context of its tokens: their pages from the prefix cache,
computed again where evicted (the same bits: prefix reuse equals recompute). Restoring loads a
snapshot into the slot. Its KV came from outside, so it never enters the shared prefix tree:
the slot holds that context, and a request in the slot whose prompt begins with its tokens
continues a fork of it (only the rest is computed), which the slot then holds instead. Such a
context is let go when the slot is erased, when a request in the slot does not continue it,
or when no request has used it for `--context-ttl`; until then it holds its pages and keeps
its model in memory, as a context of llamay's own API does.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamay.engine import Model
from llamay.errors import KVCacheFull, LlamayError, SnapshotMismatch
from llamay.server.contexts import daemon
from llamay.server.errors import ApiError
from llamay.state import Context

# How long a request waits for a busy slot it names before its 409: about one completion.
SLOT_WAIT_S = 10.0
# A slot snapshot's name: a plain file name in the slot directory, nothing that walks out of it
_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_REAP_EVERY_S = 5.0


@dataclass(eq=False)
class Slot:
    """One slot: what its last request's context held (`tokens`), the context it holds after
    a restore (else None), whether a request runs in it, and what that request did."""

    id: int
    tokens: list[int] = field(default_factory=list)
    context: Context | None = None
    busy: bool = False
    id_task: int = -1
    n_decoded: int = 0
    n_predict: int | None = None
    has_new_line: bool = False
    params: dict[str, Any] | None = None
    last_used: float = field(default_factory=time.monotonic)

    def resume(self, prompt: Sequence[int]) -> tuple[Context | None, int]:
        """The context a request in this slot generates in, and how many of its prompt's
        tokens it holds: a fork of the held context cut back to the prompt's common prefix
        (one token at least left to feed), or (None, 0) for a new one. A held context the
        prompt does not continue is let go."""
        if self.context is None:
            return None, 0
        keep = min(_common_prefix(self.context.tokens, prompt), len(prompt) - 1)
        if keep <= 0:
            self.drop_context()
            return None, 0
        fork = self.context.fork()
        fork.truncate(keep)
        return fork, keep

    def drop_context(self) -> None:
        if self.context is not None:
            self.context.close()
            self.context = None

    def describe(self, model: Model, defaults: dict[str, Any]) -> dict[str, Any]:
        """The slot as GET /slots lists it: llama-server's fields, and llamay's `n_tokens`
        (the tokens its cache holds) and `holds_kv` (a restored context is held)."""
        remain = -1 if self.n_predict is None else max(0, self.n_predict - self.n_decoded)
        return {
            "id": self.id,
            "id_task": self.id_task,
            "n_ctx": model.n_ctx,
            "speculative": model.draft is not None,
            "is_processing": self.busy,
            "params": self.params or defaults,
            "next_token": {
                "has_next_token": self.busy,
                "has_new_line": self.has_new_line,
                "n_remain": remain,
                "n_decoded": self.n_decoded,
            },
            "n_tokens": len(self.tokens),
            "holds_kv": self.context is not None,
        }


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


class SlotTable:
    """The slots of one model (thread-safe): a slot is given to one request at a time."""

    def __init__(self, model: Model, n_slots: int) -> None:
        self.model = model
        self.slots = [Slot(i) for i in range(n_slots)]
        self._changed = threading.Condition()
        self._tasks = itertools.count()

    def acquire(self, id_slot: int | None, prompt: Sequence[int]) -> Slot | None:
        """The slot a request takes: `id_slot`'s (waiting up to SLOT_WAIT_S while it is busy,
        then 409), or with None the idle one whose tokens share the longest prefix with
        `prompt` (the least recently used among equals), or None when all are busy."""
        with self._changed:
            if id_slot is None:
                idle = [slot for slot in self.slots if not slot.busy]
                if not idle:
                    return None
                slot = max(idle, key=lambda s: (_common_prefix(s.tokens, prompt), -s.last_used))
            else:
                slot = self._wait_idle(id_slot)
            slot.busy = True
            slot.id_task = next(self._tasks)
            slot.n_decoded, slot.has_new_line = 0, False
            return slot

    def release(self, slot: Slot) -> None:
        with self._changed:
            slot.busy = False
            slot.last_used = time.monotonic()
            self._changed.notify_all()

    @contextmanager
    def holding(self, id_slot: int) -> Iterator[Slot]:
        """Slot `id_slot` for one action (save, restore, erase), as a request would take it."""
        with self._changed:
            slot = self._wait_idle(id_slot)
            slot.busy = True
        try:
            yield slot
        finally:
            self.release(slot)

    def _wait_idle(self, id_slot: int) -> Slot:
        if not 0 <= id_slot < len(self.slots):
            raise ApiError(
                400,
                f"there is no slot {id_slot}: this server has {len(self.slots)} per model "
                f"(0 to {len(self.slots) - 1}; --slots)",
                "id_slot",
            )
        slot = self.slots[id_slot]
        if not self._changed.wait_for(lambda: not slot.busy, timeout=SLOT_WAIT_S):
            raise ApiError(409, f"slot {id_slot} is busy with another request", "id_slot")
        return slot

    def expire(self, idle_before: float) -> None:
        """Let go of held contexts that no request has used since `idle_before`."""
        with self._changed:
            for slot in self.slots:
                if not slot.busy and slot.context is not None and slot.last_used < idle_before:
                    slot.drop_context()


class Slots:
    """Every loaded model's slot table, made on first use; held contexts expire after `ttl`
    seconds unused."""

    def __init__(self, n_slots: int, ttl: float) -> None:
        self.n_slots = n_slots
        self.ttl = ttl
        self._tables: weakref.WeakKeyDictionary[Model, SlotTable] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        if math.isfinite(ttl):
            daemon(self._reap_forever, "llamay-slots", min(max(ttl / 4, 0.25), _REAP_EVERY_S))

    def table(self, model: Model) -> SlotTable:
        with self._lock:
            table = self._tables.get(model)
            if table is None:
                table = self._tables[model] = SlotTable(model, self.n_slots)
            return table

    def _reap_forever(self, interval: float) -> None:
        while True:
            time.sleep(interval)
            with self._lock:
                tables = list(self._tables.values())
            for table in tables:
                table.expire(time.monotonic() - self.ttl)


# --- snapshots -----------------------------------------------------------------------------------


def slot_file(directory: Path | None, filename: Any) -> Path:
    """The path of slot snapshot `filename` in `directory` (--slot-save-path): a plain name
    of letters, digits, `.`, `_` and `-`, first a letter or digit, so that no name reaches
    outside the directory; 400 otherwise, or without a directory."""
    if directory is None:
        raise ApiError(
            400,
            "saving and restoring slots is off: start the server with --slot-save-path DIR",
        )
    if not isinstance(filename, str) or not _FILENAME.fullmatch(filename):
        shown = repr(filename)[:80]
        raise ApiError(
            400,
            f"filename must be a plain file name (letters, digits, '.', '_', '-', at most 200, "
            f"first a letter or digit), not {shown}",
            "filename",
        )
    return directory / filename


def save(model: Model, slot: Slot, path: Path) -> int:
    """Write the slot's context to `path` as a snapshot (see the module docstring); the
    bytes written."""
    if slot.context is not None:
        slot.context.save(path)
    else:
        context = model.context()
        try:
            if slot.tokens:
                context.feed(slot.tokens)
            context.save(path)
        finally:
            context.close()
    return path.stat().st_size


def restore(model: Model, slot: Slot, path: Path) -> int:
    """Load the snapshot at `path` into the slot, which then holds it; the bytes read. 404
    when there is no such file, 409 for a snapshot of other weights, 400 for a damaged one."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        raise ApiError(404, f"there is no slot snapshot {path.name!r}", "filename") from None
    if not stat.S_ISREG(found.st_mode):
        raise ApiError(400, f"{path.name!r} is not a slot snapshot file", "filename")
    try:
        context = model.restore(path)
    except SnapshotMismatch as error:
        raise ApiError(409, f"{path.name}: {error}", "filename") from None
    except KVCacheFull:  # busy, not wrong: a 503
        raise
    except LlamayError as error:
        raise ApiError(400, f"{path.name}: {error}", "filename") from None
    slot.drop_context()
    slot.context = context
    slot.tokens = context.tokens
    return found.st_size
