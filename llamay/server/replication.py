"""The replication policy: the server's contexts kept in a state directory that replicas share.

`llamay serve --state-dir DIR` gives the context registry (contexts.py) a `Replication` over
DIR (statedir.py), and every context the registry holds is then also a snapshot in DIR, which
every replica sharing DIR can restore:

- A context the registry adds takes its lease first (a new id: nobody else holds it).
- Each change (`changed`, called by whoever changed the context while nothing else runs in it)
  forks the context (copy-on-write: no page copied) and hands the fork to a writer thread,
  which writes it to DIR behind the answer. A kill -9 loses exactly the changes whose snapshot
  was not yet renamed into place (`Entry.persisted_n_tokens` says how far a context is in DIR).
- An id the registry does not hold is restored from DIR (`restore`), after taking its lease
  (asking the replica that holds it to let it go once idle, and waiting up to `lease_wait`
  seconds for that or for the lease to go stale, then 409 naming the holder) and checking that
  this replica's model of that name has the weights the context was made with (409 otherwise).
- The leases of resident contexts are renewed in the background; a context whose lease was
  taken over (this replica hung past its lease) is dropped from memory, unwritten. A context
  another replica asks for is let go as soon as it is idle and written.
- The registry may let go of an idle context that is `written`, giving its lease back, when it
  needs room (past `--max-contexts`, or a full KV cache while restoring).
- A drain (SIGTERM) lets each context go as soon as it is idle and written (the registry's
  `let_go_idle`, again and again while streams finish), then `drain()` waits for the writer
  and gives every lease back.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from llamay.engine import Model
from llamay.errors import KVCacheFull, LlamayError, SnapshotCorrupt, SnapshotMismatch
from llamay.server.contexts import ContextRegistry, Entry, daemon, warn
from llamay.server.errors import ApiError
from llamay.server.metrics import Metrics
from llamay.server.statedir import LeaseConflict, StateDir, valid_id
from llamay.state import Context

# How often a request that waits for another replica's lease looks again.
_LEASE_POLL_S = 0.1
# How often a replica looks whether another asks for one of its contexts.
_HAND_OVER_EVERY_S = 0.1


@dataclass
class Copy:
    """What the policy keeps with a resident context (Entry.copy): the change its snapshot in
    DIR holds (`saved_version`, -1: none yet), that snapshot's length, and the lock a write and
    a deletion take, so that nothing is written after a deletion."""

    saved_version: int = -1
    n_tokens: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Pending:
    """A fork of a context as it was at one change, waiting to be written."""

    version: int
    fork: Context
    last_used: float  # Unix seconds


class Replication:
    """The registry's contexts in the shared directory `store`; `load(name)` gives the model a
    name stands for (to restore on), `metrics` counts restores, writes and lease conflicts."""

    def __init__(
        self,
        store: StateDir,
        load: Callable[[str], Model],
        *,
        metrics: Metrics | None = None,
        lease_wait: float = 0.0,
    ) -> None:
        self.store = store
        self.lease_wait = lease_wait
        self._load = load
        self._metrics = metrics or Metrics()
        self._registry: ContextRegistry | None = None
        self._lock = threading.Lock()
        self._restoring: dict[str, threading.Lock] = {}
        self._pending: dict[str, _Pending] = {}
        self._writing = 0
        self._wake = threading.Condition(self._lock)

    def serve(self, registry: ContextRegistry) -> None:
        """Starts keeping `registry`'s contexts (the registry calls this once, when made)."""
        if self._registry is not None:
            raise ValueError("a replication policy serves one registry")
        self._registry = registry
        daemon(self._write_forever, "llamay-snapshots")
        daemon(self._renew_forever, "llamay-leases", max(self.store.lease_ttl / 3, 0.1))
        daemon(self._hand_over_forever, "llamay-handover")

    @property
    def registry(self) -> ContextRegistry:
        if self._registry is None:
            raise RuntimeError("the replication policy serves no registry yet")
        return self._registry

    # --- what the registry tells and asks ---------------------------------------------------------

    def claim(self, entry: Entry) -> None:
        """A context the registry adds: its lease taken (a new id: nobody else holds it)."""
        entry.copy = Copy()
        self.store.acquire(entry.id)

    def discard(self, entry: Entry) -> None:
        """A context whose adding failed: its files go."""
        self.store.delete(entry.id)

    def changed(self, entry: Entry) -> None:
        """`entry`'s context changed: a fork of it as it is now is written behind."""
        pending = _Pending(entry.version, entry.context.fork(), time.time())
        with self._lock:
            older = self._pending.pop(entry.id, None)
            self._pending[entry.id] = pending
            self._wake.notify_all()
        if older is not None:
            older.fork.close()

    def written(self, entry: Entry) -> bool:
        """Whether every change of `entry` is in the directory (it may be let go)."""
        with self._lock:
            pending = entry.id in self._pending
        copy: Copy = entry.copy
        return not pending and copy.saved_version == entry.version

    def forgotten(self, entry: Entry) -> None:
        """`entry` left this process's memory: its lease goes back."""
        self.store.release(entry.id)

    def removed(self, entry: Entry) -> None:
        """`entry` is out for good (deleted, expired): no write of it lands after its files go."""
        with self._lock:
            pending = self._pending.pop(entry.id, None)
        if pending is not None:
            pending.fork.close()
        with entry.copy.lock:
            entry.removed = True
            self.store.delete(entry.id)

    def restore(self, context_id: str) -> Entry | None:
        """The context from the directory, resident in the registry from now on (None: not
        there, or not a context id)."""
        if not valid_id(context_id):
            return None
        with self._lock:
            gate = self._restoring.setdefault(context_id, threading.Lock())
        try:
            with gate:  # one restore of an id at a time; the others find it resident
                entry = self.registry.resident(context_id)
                if entry is None:
                    entry = self._restore_now(context_id)
                return entry
        finally:
            with self._lock:
                self._restoring.pop(context_id, None)

    def stored(self, resident: Collection[str]) -> Iterator[dict[str, Any]]:
        """{"id", "model", "n_tokens"} of each context in the directory but the `resident`
        ones (which the registry describes itself)."""
        for context_id in self.store.ids():
            if context_id in resident:
                continue
            manifest = _quiet_manifest(self.store, context_id)
            if manifest is not None:
                yield {
                    "id": context_id,
                    "model": manifest["model"],
                    "n_tokens": manifest.get("n_tokens"),
                }

    def expire_stored(self, cutoff: float) -> list[str]:
        """Deletes the contexts in the directory unused since `cutoff` (Unix seconds) that no
        live replica holds; returns their ids."""
        expired = []
        for context_id in self.store.ids():
            with self._lock:
                restoring = context_id in self._restoring
            if restoring or self.registry.resident(context_id) is not None:
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

    def flush(self, timeout: float = math.inf) -> bool:
        """Waits until every change is written (at most `timeout` seconds); True if all are."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending or self._writing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(min(left, 0.5))
        return True

    def drain(self, timeout: float = math.inf) -> bool:
        """Writes every change, then lets every context go and gives its lease back (one still
        busy, past the grace period, is given up as it is)."""
        flushed = self.flush(timeout)
        for entry in self.registry.all():
            if not self.registry.let_go(entry):
                self.registry.drop(entry)
                self.store.release(entry.id)
        return flushed

    def stats(self) -> dict[str, Any]:
        with self._lock:
            pending = len(self._pending)
        return {
            "unwritten_contexts": pending,
            "state_dir": str(self.store.root),
            "replica": self.store.owner,
        }

    # --- restoring -------------------------------------------------------------------------------

    def _restore_now(self, context_id: str) -> Entry | None:
        store = self.store
        manifest = _quiet_manifest(store, context_id)
        if manifest is None and not store.exists(context_id):
            return None
        if manifest is not None:
            # The weights first: a replica with other weights behind the name takes no lease.
            self._check_weights(context_id, manifest)
        self.registry.make_room()
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
        entry = Entry(context_id, name, context, str(manifest.get("kind", "context")))
        entry.copy = Copy(saved_version=entry.version, n_tokens=context.n_tokens)
        self.registry.insert(entry)
        return entry

    def _restore_file(self, context_id: str, model: Model) -> Context:
        """The context's snapshot restored on `model`; while its KV cache is full, the least
        recently used idle contexts of that model already written are let go to make room."""
        while True:
            try:
                return model.restore(self.store.snapshot_path(context_id))
            except SnapshotMismatch as error:
                raise ApiError(409, f"context {context_id}: {error}") from None
            except SnapshotCorrupt as error:
                raise ApiError(500, f"context {context_id} cannot be restored: {error}") from None
            except KVCacheFull:
                candidates = sorted(
                    (e for e in self.registry.all() if e.context.model is model),
                    key=lambda e: e.last_used,
                )
                if not any(self.registry.let_go(entry) for entry in candidates):
                    raise

    def _check_weights(self, context_id: str, manifest: dict[str, Any]) -> Model:
        """This replica's model of the manifest's name, if it has the context's weights."""
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
                self._writing += 1
            entry = self.registry.resident(context_id)
            try:
                if entry is not None:
                    self._write(entry, pending)
            except Exception as error:  # a failed write must not stop the writer
                warn(f"context {context_id} was not written to the state directory: {error}")
            finally:
                pending.fork.close()
                with self._lock:
                    self._writing -= 1
                    self._wake.notify_all()

    def _write(self, entry: Entry, pending: _Pending) -> None:
        store = self.store
        fork = pending.fork
        note = dict(entry.context.note or {}) | {"model": entry.model_name, "kind": entry.kind}
        manifest = {
            "model": entry.model_name,
            "fingerprint": fork.model.fingerprint,
            "n_tokens": fork.n_tokens,
            "last_used": pending.last_used,
            "kind": entry.kind,
        }
        copy = entry.copy
        with copy.lock:
            if entry.removed:
                return
            started = time.perf_counter()
            if not store.commit(entry.id, lambda path: fork.save(path, note=note), manifest):
                warn(f"context {entry.id}: another replica took its lease; dropped here")
                self.registry.drop(entry)
                return
            self._metrics.snapshot_written(time.perf_counter() - started, fork.n_tokens)
            copy.saved_version = max(copy.saved_version, pending.version)
            copy.n_tokens = fork.n_tokens

    def _renew_forever(self, interval: float) -> None:
        while True:
            time.sleep(interval)
            for entry in self.registry.all():
                try:
                    if not self.store.renew(entry.id) and not entry.removed:
                        warn(f"context {entry.id}: its lease was taken over; dropped here")
                        self.registry.drop(entry)
                except OSError as error:
                    warn(f"context {entry.id}: lease not renewed: {error}")

    def _hand_over_forever(self) -> None:
        """Lets go of each context another replica asks for, once it is idle and written."""
        while True:
            time.sleep(_HAND_OVER_EVERY_S)
            for entry in self.registry.all():
                try:
                    if self.store.wanted(entry.id) and self.registry.let_go(entry):
                        self._metrics.handed_over()
                except OSError as error:
                    warn(f"context {entry.id}: not handed over: {error}")


def _quiet_manifest(store: StateDir, context_id: str) -> dict[str, Any] | None:
    """The manifest, or None for one that is missing or damaged (said on stderr)."""
    try:
        return store.manifest(context_id)
    except LlamayError as error:
        warn(str(error))
        return None
