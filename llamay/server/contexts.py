"""The server's contexts, by id: the registry every API that keeps contexts shares.

The native context API (native.py) keeps its contexts here, and so may any other API that keeps
state on the server (stored responses): `add` a context (with a `kind` of its own), `get` it by
id, `touch` it after each change, `remove` it; idle ones expire after the TTL. What an API keeps
with a context beside its KV goes in `context.note` (a JSON object): it is written with the
snapshot and comes back with the context on any replica.

Without a state directory, a context lives in this process only. With one
(`--state-dir DIR`, statedir.py), every context is also a snapshot in DIR, which every replica
sharing DIR can restore:

- `touch(entry)`, called by whoever changed the context while nothing else runs in it, forks
  it (copy-on-write: no page copied) and hands the fork to a writer thread, which writes it to
  DIR behind the answer. A kill -9 loses exactly the changes whose snapshot was not yet
  renamed into place (`persisted_n_tokens` says how far a context is in DIR).
- `get` of an id not in memory restores it from DIR, after taking its lease (asking the
  replica that holds it to let it go once idle, and waiting up to `lease_wait` seconds for
  that or for the lease to go stale, then 409 naming the holder) and checking that this replica's model of that name has the weights
  the context was made with (409 otherwise).
- The leases of resident contexts are renewed in the background; a context whose lease was
  taken over (this replica hung past its lease) is dropped from memory, unwritten.
- Past `limit` resident contexts, the least recently used idle one already in DIR is let go
  (its lease given back) to make room, rather than answering 429.
- A drain (SIGTERM) lets each context go as soon as it is idle and written (`let_go_idle`,
  again and again while streams finish), then `drain()` waits for the writer and gives every
  lease back.
"""

from __future__ import annotations

import math
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llamay.engine import Model
from llamay.errors import KVCacheFull, LlamayError, SnapshotCorrupt, SnapshotMismatch
from llamay.server.errors import ApiError
from llamay.server.metrics import Metrics
from llamay.server.native_describe import PREFIX
from llamay.server.statedir import LeaseConflict, StateDir, valid_id
from llamay.state import Context

# How often, at most, idle contexts are looked for; what a 429 for too many suggests.
_REAP_EVERY_S = 5.0
_RETRY_AFTER_S = 30
# How often a request that waits for another replica's lease looks again.
_LEASE_POLL_S = 0.1
# How often a replica looks whether another asks for one of its contexts.
_HAND_OVER_EVERY_S = 0.1


@dataclass
class Entry:
    """One context of the server: its id, the model name it was made with, when a request last
    used it (monotonic), whether a generation runs in it (`busy`, under `mutex`, which is only
    held for a moment), and what an API keeps with it (`kind`: "context" for the native API).
    `generation` is the one running in it, if any (a drain ends it). `version` counts changes
    (touch); `persisted_n_tokens` is the length of its snapshot in the state directory."""

    id: str
    model_name: str
    context: Context
    kind: str = "context"
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False
    mutex: threading.Lock = field(default_factory=threading.Lock)
    generation: Any = None
    version: int = 0
    saved_version: int = -1
    persisted_n_tokens: int | None = None
    removed: bool = False
    persist_lock: threading.Lock = field(default_factory=threading.Lock)
    # what another API keeps with a context it made (responses_store.py: a stored response)
    meta: Any = None

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "model": self.model_name, "n_tokens": self.context.n_tokens}


@dataclass
class _Pending:
    """A fork of a context as it was at one change, waiting to be written."""

    version: int
    fork: Context
    last_used: float  # Unix seconds


class ContextRegistry:
    """The contexts of a server, by id (thread-safe); see the module docstring. At most `limit`
    resident at once; one that no request has used for `ttl` seconds is closed (and deleted
    from the state directory). `load(name)` gives the model a name stands for (restores)."""

    def __init__(
        self,
        limit: int,
        ttl: float,
        *,
        store: StateDir | None = None,
        load: Callable[[str], Model] | None = None,
        metrics: Metrics | None = None,
        lease_wait: float = 0.0,
    ) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self.limit = limit
        self.ttl = ttl
        self.store = store
        self.lease_wait = lease_wait
        self._load = load
        self._metrics = metrics or Metrics()
        self._restoring: dict[str, threading.Lock] = {}
        self._pending: dict[str, _Pending] = {}
        self._writing = 0
        self._wake = threading.Condition(self._lock)
        if math.isfinite(ttl):
            interval = min(max(ttl / 4, 0.25), _REAP_EVERY_S)
            _daemon(self._reap_forever, "llamay-contexts", interval)
        if store is not None:
            _daemon(self._write_forever, "llamay-snapshots")
            _daemon(self._renew_forever, "llamay-leases", max(store.lease_ttl / 3, 0.1))
            _daemon(self._hand_over_forever, "llamay-handover")

    # --- the verbs -------------------------------------------------------------------------------

    def add(
        self,
        model_name: str,
        context: Context,
        kind: str = "context",
        *,
        entry_id: str | None = None,
        meta: Any = None,
    ) -> Entry:
        """Registers `context` under a new opaque id, or `entry_id` where another API names its
        contexts itself (and writes it to the state directory, behind); 429 (its pages freed)
        when `limit` are resident and none can be let go, 409 when `entry_id` is taken."""
        entry = Entry(entry_id or f"ctx-{secrets.token_hex(8)}", model_name, context, kind)
        entry.meta = meta
        with self._lock:
            taken = entry.id in self._entries
        if taken:
            context.close()
            raise ApiError(409, f"context {entry.id} is open already")
        try:
            if self.store is not None:
                self.store.acquire(entry.id)  # a new id: nobody else holds it
            while True:  # room made, then taken under the lock (another add may come first)
                self._make_room()
                with self._lock:
                    if len(self._entries) < self.limit:
                        self._entries[entry.id] = entry
                        break
        except BaseException:
            if self.store is not None:
                self.store.delete(entry.id)
            context.close()
            raise
        self.touch(entry)
        return entry

    def check_room(self) -> None:
        """429 when `limit` contexts are resident and none can be let go: asked before a
        context is computed, so that a request past the limit costs nothing."""
        self._make_room()

    def get(self, context_id: str) -> Entry:
        """The context `context_id`, restored from the state directory if it is not resident;
        404 when there is no such context."""
        with self._lock:
            entry = self._entries.get(context_id)
        if entry is None and self.store is not None and valid_id(context_id):
            entry = self._restore(context_id)
        if entry is None:
            raise _missing(context_id)
        entry.last_used = time.monotonic()
        return entry

    def touch(self, entry: Entry) -> None:
        """`entry`'s context changed (the caller has it to itself: no generation runs in it).
        Marks it used now and, with a state directory, writes it there behind the answer."""
        entry.last_used = time.monotonic()
        entry.version += 1
        if self.store is None or entry.removed or entry.context.closed:
            return
        pending = _Pending(entry.version, entry.context.fork(), time.time())
        with self._lock:
            older = self._pending.pop(entry.id, None)
            self._pending[entry.id] = pending
            self._wake.notify_all()
        if older is not None:
            older.fork.close()

    def remove(self, context_id: str) -> Entry:
        """Takes the context out of the registry and the state directory; the caller closes
        its context. 404 when there is no such context."""
        entry = self.get(context_id)  # restored first if elsewhere: it takes the lease
        with self._lock:
            self._entries.pop(context_id, None)
            pending = self._pending.pop(context_id, None)
        if pending is not None:
            pending.fork.close()
        with entry.persist_lock:
            entry.removed = True
            if self.store is not None:
                self.store.delete(context_id)
        return entry

    def all(self) -> list[Entry]:
        """The resident contexts."""
        with self._lock:
            return list(self._entries.values())

    def listing(self) -> list[dict[str, Any]]:
        """Every context: the resident ones, and (with a state directory) those in it."""
        resident = {entry.id: entry.describe() for entry in self.all()}
        if self.store is not None:
            for context_id in self.store.ids():
                if context_id not in resident:
                    manifest = _quiet_manifest(self.store, context_id)
                    if manifest is not None:
                        resident[context_id] = {
                            "id": context_id,
                            "model": manifest["model"],
                            "n_tokens": manifest.get("n_tokens"),
                        }
        return sorted(resident.values(), key=lambda item: item["id"])

    def expire(self) -> list[str]:
        """Closes the contexts idle for longer than the TTL (not one a request is using), and
        deletes them from the state directory with those no replica holds; returns their ids."""
        cutoff = time.monotonic() - self.ttl
        expired = []
        for entry in self.all():
            with entry.mutex:
                if entry.busy or entry.last_used > cutoff:
                    continue
                entry.busy = True  # nothing may start on it now
            self._forget(entry)
            if self.store is not None:
                with entry.persist_lock:
                    entry.removed = True
                    self.store.delete(entry.id)
            expired.append(entry.id)
        if self.store is not None:
            expired += self._expire_stored(time.time() - self.ttl)
        return expired

    def flush(self, timeout: float = math.inf) -> bool:
        """Waits until every change is written to the state directory (at most `timeout`
        seconds); True if all are."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending or self._writing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(min(left, 0.5))
        return True

    def let_go_idle(self) -> None:
        """Drops every idle context whose changes are written, giving its lease back, so that
        another replica can take it at once (a drain does this while its streams finish)."""
        if self.store is None:
            return  # nowhere to keep them: they stay until the process ends
        for entry in self.all():
            self._let_go(entry)

    def drain(self, timeout: float = math.inf) -> bool:
        """What a replica does last: writes every change, then lets every context go and gives
        its lease back (one still busy, past the grace period, is given up as it is)."""
        flushed = self.flush(timeout)
        if self.store is not None:
            for entry in self.all():
                if not self._let_go(entry):
                    with self._lock:
                        self._entries.pop(entry.id, None)
                    self.store.release(entry.id)
        return flushed

    def stats(self) -> dict[str, Any]:
        """What /llamay/v1/stats and /metrics show of the registry."""
        with self._lock:
            resident = len(self._entries)
            pending = len(self._pending)
        return {
            "resident_contexts": resident,
            "unwritten_contexts": pending,
            "state_dir": None if self.store is None else str(self.store.root),
            "replica": None if self.store is None else self.store.owner,
        }

    # --- room ------------------------------------------------------------------------------------

    def _make_room(self) -> None:
        """Lets go of the least recently used idle context already in the state directory
        while `limit` are resident; 429 when none can go."""
        while True:
            with self._lock:
                if len(self._entries) < self.limit:
                    return
                candidates = sorted(
                    (e for e in self._entries.values() if e.id not in self._pending),
                    key=lambda e: e.last_used,
                )
            if self.store is None or not any(self._let_go(e) for e in candidates):
                raise self._full()

    def _let_go(self, entry: Entry) -> bool:
        """Drops a resident context that is idle and written (its lease given back)."""
        with entry.mutex:
            if entry.busy or entry.saved_version != entry.version:
                return False
            entry.busy = True
        self._forget(entry)
        return True

    def _forget(self, entry: Entry) -> None:
        """Out of memory (the caller has marked it busy): its lease given back, pages freed."""
        with self._lock:
            self._entries.pop(entry.id, None)
        if self.store is not None:
            self.store.release(entry.id)
        entry.context.close()

    def _full(self) -> ApiError:
        return ApiError(
            429,
            f"{self.limit} contexts are open, the server's limit (--max-contexts): delete "
            "some, or retry once idle ones expire (--context-ttl)",
            retry_after=max(1, int(min(self.ttl, _RETRY_AFTER_S))),
        )

    # --- restoring -------------------------------------------------------------------------------

    def _restore(self, context_id: str) -> Entry | None:
        """The context from the state directory, resident here from now on (None: not there)."""
        assert self.store is not None and self._load is not None
        with self._lock:
            gate = self._restoring.setdefault(context_id, threading.Lock())
        try:
            with gate:  # one restore of an id at a time; the others find it resident
                with self._lock:
                    entry = self._entries.get(context_id)
                if entry is None:
                    entry = self._restore_now(context_id)
                return entry
        finally:
            with self._lock:
                self._restoring.pop(context_id, None)

    def _restore_now(self, context_id: str) -> Entry | None:
        store = self.store
        assert store is not None and self._load is not None
        manifest = _quiet_manifest(store, context_id)
        if manifest is None and not store.exists(context_id):
            return None
        if manifest is not None:
            # The weights first: a replica with other weights behind the name takes no lease.
            self._check_weights(context_id, manifest)
        self._make_room()
        self._take_lease(context_id)
        try:
            manifest = store.manifest(context_id)  # as the last holder left it
            if manifest is None:
                return None  # a creation that never finished
            name = manifest["model"]
            model = self._check_weights(context_id, manifest)
            started = time.perf_counter()
            context = self._restore_file(context_id, model)
            self._metrics.restored(time.perf_counter() - started)
        except BaseException:
            store.release(context_id)
            raise
        kind = str(manifest.get("kind", "context"))
        entry = Entry(context_id, name, context, kind)
        entry.version = entry.saved_version = 0
        entry.persisted_n_tokens = context.n_tokens
        with self._lock:
            self._entries[context_id] = entry
        return entry

    def _restore_file(self, context_id: str, model: Model) -> Context:
        """The context's snapshot restored on `model`; while its KV cache is full, the least
        recently used idle contexts of that model already written are let go to make room."""
        assert self.store is not None
        while True:
            try:
                return model.restore(self.store.snapshot_path(context_id))
            except SnapshotMismatch as error:
                raise ApiError(409, f"context {context_id}: {error}") from None
            except SnapshotCorrupt as error:
                raise ApiError(500, f"context {context_id} cannot be restored: {error}") from None
            except KVCacheFull:
                with self._lock:
                    candidates = sorted(
                        (e for e in self._entries.values() if e.context.model is model),
                        key=lambda e: e.last_used,
                    )
                if not any(self._let_go(entry) for entry in candidates):
                    raise

    def _check_weights(self, context_id: str, manifest: dict[str, Any]) -> Model:
        """This replica's model of the manifest's name, if it has the context's weights."""
        assert self._load is not None
        name = manifest["model"]
        model = self._load(name)
        if model.fingerprint != manifest["fingerprint"]:
            raise ApiError(
                409,
                f"context {context_id} was made by other weights than this replica's "
                f"{name!r} (the context's model file has fingerprint "
                f"{manifest['fingerprint'][:16]}…, this replica's {model.fingerprint[:16]}…): "
                "every replica must serve the same file under one name",
            )
        return model

    def _take_lease(self, context_id: str) -> None:
        """The context's lease: asks its holder to let it go once idle, and waits up to
        lease_wait for that (or for the lease to go stale)."""
        assert self.store is not None
        deadline = time.monotonic() + self.lease_wait
        asked = False
        while True:
            try:
                self.store.acquire(context_id)
                return
            except LeaseConflict as conflict:
                if time.monotonic() >= deadline:
                    self._metrics.lease_conflict()
                    raise ApiError(409, str(conflict)) from None
                if not asked:
                    self.store.ask(context_id)
                    asked = True
            time.sleep(_LEASE_POLL_S)

    # --- background work -------------------------------------------------------------------------

    def _write_forever(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._wake.wait()
                context_id = next(iter(self._pending))
                pending = self._pending.pop(context_id)
                entry = self._entries.get(context_id)
                self._writing += 1
            try:
                if entry is not None:
                    self._write(entry, pending)
            except Exception as error:  # a failed write must not stop the writer
                _warn(f"context {context_id} was not written to the state directory: {error}")
            finally:
                pending.fork.close()
                with self._lock:
                    self._writing -= 1
                    self._wake.notify_all()

    def _write(self, entry: Entry, pending: _Pending) -> None:
        store = self.store
        assert store is not None
        fork = pending.fork
        note = dict(entry.context.note or {}) | {"model": entry.model_name, "kind": entry.kind}
        manifest = {
            "model": entry.model_name,
            "fingerprint": fork.model.fingerprint,
            "n_tokens": fork.n_tokens,
            "last_used": pending.last_used,
            "kind": entry.kind,
        }
        with entry.persist_lock:
            if entry.removed:
                return
            started = time.perf_counter()
            if not store.commit(entry.id, lambda path: fork.save(path, note=note), manifest):
                _warn(f"context {entry.id}: another replica took its lease; dropped here")
                self._drop_lost(entry)
                return
            self._metrics.snapshot_written(time.perf_counter() - started, fork.n_tokens)
            entry.saved_version = max(entry.saved_version, pending.version)
            entry.persisted_n_tokens = fork.n_tokens

    def _drop_lost(self, entry: Entry) -> None:
        """A context whose lease another replica holds now: out of memory, nothing written."""
        with self._lock:
            self._entries.pop(entry.id, None)
        with entry.mutex:
            busy, entry.busy = entry.busy, True
        if not busy:
            entry.context.close()

    def _renew_forever(self, interval: float) -> None:
        assert self.store is not None
        while True:
            time.sleep(interval)
            for entry in self.all():
                try:
                    if not self.store.renew(entry.id) and not entry.removed:
                        _warn(f"context {entry.id}: its lease was taken over; dropped here")
                        self._drop_lost(entry)
                except OSError as error:
                    _warn(f"context {entry.id}: lease not renewed: {error}")

    def _hand_over_forever(self) -> None:
        """Lets go of each context another replica asks for, once it is idle and written."""
        assert self.store is not None
        while True:
            time.sleep(_HAND_OVER_EVERY_S)
            for entry in self.all():
                try:
                    if self.store.wanted(entry.id) and self._let_go(entry):
                        self._metrics.handed_over()
                except OSError as error:
                    _warn(f"context {entry.id}: not handed over: {error}")

    def _expire_stored(self, cutoff: float) -> list[str]:
        """Deletes the contexts in the state directory unused since `cutoff` (Unix seconds)
        that no live replica holds."""
        assert self.store is not None
        expired = []
        for context_id in self.store.ids():
            with self._lock:
                if context_id in self._entries or context_id in self._restoring:
                    continue
            manifest = _quiet_manifest(self.store, context_id)
            if manifest is None or float(manifest.get("last_used", 0)) > cutoff:
                continue
            try:
                self.store.acquire(context_id)
            except LeaseConflict:
                continue
            self.store.delete(context_id)
            expired.append(context_id)
        return expired

    def _reap_forever(self, interval: float) -> None:
        while True:
            time.sleep(interval)
            try:
                self.expire()
            except (OSError, LlamayError) as error:
                _warn(f"expiring contexts: {error}")


def _missing(context_id: str) -> ApiError:
    return ApiError(404, f"no context {context_id[:80]!r}: list them at GET {PREFIX}/contexts")


def _quiet_manifest(store: StateDir, context_id: str) -> dict[str, Any] | None:
    """The manifest, or None for one that is missing or damaged (said on stderr)."""
    try:
        return store.manifest(context_id)
    except LlamayError as error:
        _warn(str(error))
        return None


def _daemon(target: Callable[..., None], name: str, *args: Any) -> None:
    threading.Thread(target=target, args=args, name=name, daemon=True).start()


def _warn(message: str) -> None:
    print(f"llamay: {message}", file=sys.stderr, flush=True)
