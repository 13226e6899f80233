"""The server's contexts, by id: the registry every API that keeps contexts shares.

The native context API (native.py) keeps its contexts here, and so may any other API that keeps
state on the server (stored responses): `add` a context (with a `kind` of its own), `get` it by
id, `touch` it after each change, `remove` it. What an API keeps with a context beside its KV
goes in `context.note` (a JSON object), which a snapshot carries.

The registry itself is local: at most `limit` contexts are resident (429 past that), and one no
request has used for `ttl` seconds is closed. Given a replication policy (`--state-dir DIR`,
replication.py), every context is also a snapshot in DIR that any replica sharing DIR restores:
the policy is told of each change, asked for an id this process does not hold, and lets written
idle contexts go when the registry needs room. Without one, a context lives in this process only.

Invariants: an entry whose `busy` is set (under its `mutex`) is used by one request (or is
being let go), and nothing else closes, forks or writes its context; an entry out of the
registry (`removed`, or let go) never comes back under the same Entry object.
"""

from __future__ import annotations

import math
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llamay.errors import LlamayError
from llamay.server.errors import ApiError
from llamay.server.native_describe import PREFIX
from llamay.state import Context

if TYPE_CHECKING:
    from llamay.server.replication import Replication

# How often, at most, idle contexts are looked for; what a 429 for too many suggests.
_REAP_EVERY_S = 5.0
_RETRY_AFTER_S = 30


@dataclass
class Entry:
    """One context of the server: its id, the model name it was made with, when a request last
    used it (monotonic), whether a generation runs in it (`busy`, under `mutex`, which is only
    held for a moment), and what an API keeps with it (`kind`: "context" for the native API;
    `meta`: a stored response, responses_store.py). `generation` is the one running in it, if
    any (a drain ends it). `version` counts changes (touch); `removed`: taken out for good
    (deleted or expired). `copy` is the replication policy's record of the context's snapshot
    in the state directory (None without one)."""

    id: str
    model_name: str
    context: Context
    kind: str = "context"
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False
    mutex: threading.Lock = field(default_factory=threading.Lock)
    generation: Any = None
    version: int = 0
    removed: bool = False
    meta: Any = None
    copy: Any = None

    @property
    def persisted_n_tokens(self) -> int | None:
        """How many of its tokens its snapshot in the state directory holds (None: none)."""
        return None if self.copy is None else self.copy.n_tokens

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "model": self.model_name, "n_tokens": self.context.n_tokens}


class ContextRegistry:
    """The contexts of a server, by id (thread-safe); see the module docstring. At most `limit`
    resident at once; one that no request has used for `ttl` seconds is closed (and, with a
    replication policy, deleted from the state directory)."""

    def __init__(self, limit: int, ttl: float, replication: Replication | None = None) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self.limit = limit
        self.ttl = ttl
        self.replication = replication
        if math.isfinite(ttl):
            interval = min(max(ttl / 4, 0.25), _REAP_EVERY_S)
            daemon(self._reap_forever, "llamay-contexts", interval)
        if replication is not None:
            replication.serve(self)

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
        contexts itself; 429 (its pages freed) when `limit` are resident and none can be let
        go, 409 when `entry_id` is taken."""
        entry = Entry(entry_id or f"ctx-{secrets.token_hex(8)}", model_name, context, kind)
        entry.meta = meta
        with self._lock:
            taken = entry.id in self._entries
        if taken:
            context.close()
            raise ApiError(409, f"context {entry.id} is open already")
        try:
            if self.replication is not None:
                self.replication.claim(entry)
            while True:  # room made, then taken under the lock (another add may come first)
                self.make_room()
                with self._lock:
                    if len(self._entries) < self.limit:
                        self._entries[entry.id] = entry
                        break
        except BaseException:
            if self.replication is not None:
                self.replication.discard(entry)
            context.close()
            raise
        self.touch(entry)
        return entry

    def check_room(self) -> None:
        """429 when `limit` contexts are resident and none can be let go: asked before a
        context is computed, so that a request past the limit costs nothing."""
        self.make_room()

    def get(self, context_id: str) -> Entry:
        """The context `context_id`, restored by the replication policy if it is not resident;
        404 when there is no such context."""
        entry = self.resident(context_id)
        if entry is None and self.replication is not None:
            entry = self.replication.restore(context_id)
        if entry is None:
            raise _missing(context_id)
        entry.last_used = time.monotonic()
        return entry

    def touch(self, entry: Entry) -> None:
        """`entry`'s context changed (the caller has it to itself: no generation runs in it).
        Marks it used now and tells the replication policy, which writes it behind."""
        entry.last_used = time.monotonic()
        entry.version += 1
        if self.replication is not None and not entry.removed and not entry.context.closed:
            self.replication.changed(entry)

    def remove(self, context_id: str) -> Entry:
        """Takes the context out of the registry (and the state directory); the caller closes
        its context. 404 when there is no such context."""
        entry = self.get(context_id)  # restored first if elsewhere: the policy takes it here
        with self._lock:
            self._entries.pop(context_id, None)
        self._removed(entry)
        return entry

    def all(self) -> list[Entry]:
        """The resident contexts."""
        with self._lock:
            return list(self._entries.values())

    def listing(self) -> list[dict[str, Any]]:
        """Every context: the resident ones, and those only the state directory holds."""
        resident = {entry.id: entry.describe() for entry in self.all()}
        if self.replication is not None:
            for item in self.replication.stored(resident):
                resident[item["id"]] = item
        return sorted(resident.values(), key=lambda item: item["id"])

    def expire(self) -> list[str]:
        """Closes the contexts idle for longer than the TTL (not one a request is using), and
        has the policy delete them and the stored ones no replica holds; returns their ids."""
        cutoff = time.monotonic() - self.ttl
        expired = []
        for entry in self.all():
            with entry.mutex:
                if entry.busy or entry.last_used > cutoff:
                    continue
                entry.busy = True  # nothing may start on it now
            self.forget(entry)
            self._removed(entry)
            expired.append(entry.id)
        if self.replication is not None:
            expired += self.replication.expire_stored(time.time() - self.ttl)
        return expired

    def flush(self, timeout: float = math.inf) -> bool:
        """Waits until every change is in the state directory (at most `timeout` seconds); True
        if all are (always, without one)."""
        return self.replication is None or self.replication.flush(timeout)

    def let_go_idle(self) -> None:
        """Drops every idle context whose changes are written, so that another replica can
        take it at once (a drain does this while its streams finish). Without a state
        directory there is nowhere to keep them: they stay until the process ends."""
        for entry in self.all():
            self.let_go(entry)

    def drain(self, timeout: float = math.inf) -> bool:
        """What a replica does last: writes every change, then lets every context go (one still
        busy, past the grace period, is given up as it is)."""
        if self.replication is None:
            return True
        return self.replication.drain(timeout)

    def stats(self) -> dict[str, Any]:
        """What /llamay/v1/stats and /metrics show of the registry."""
        with self._lock:
            resident = len(self._entries)
        copies = {"unwritten_contexts": 0, "state_dir": None, "replica": None}
        if self.replication is not None:
            copies = self.replication.stats()
        return {"resident_contexts": resident, **copies}

    # --- what the replication policy works with --------------------------------------------------

    def resident(self, context_id: str) -> Entry | None:
        """The context if it is in this process's memory."""
        with self._lock:
            return self._entries.get(context_id)

    def insert(self, entry: Entry) -> None:
        """Makes a restored `entry` resident (the policy made room first)."""
        with self._lock:
            self._entries[entry.id] = entry

    def make_room(self) -> None:
        """Lets go of the least recently used idle context that the replication policy has
        written while `limit` are resident; 429 when none can go."""
        while True:
            with self._lock:
                if len(self._entries) < self.limit:
                    return
                candidates = sorted(self._entries.values(), key=lambda e: e.last_used)
            if not any(self.let_go(entry) for entry in candidates):
                raise self._full()

    def let_go(self, entry: Entry) -> bool:
        """Drops a resident context that is idle and written to the state directory (False,
        and nothing done, otherwise: always without a state directory)."""
        if self.replication is None:
            return False
        with entry.mutex:
            if entry.busy or not self.replication.written(entry):
                return False
            entry.busy = True
        self.forget(entry)
        return True

    def forget(self, entry: Entry) -> None:
        """Out of memory (the caller has marked it busy): the policy told, its pages freed."""
        with self._lock:
            self._entries.pop(entry.id, None)
        if self.replication is not None:
            self.replication.forgotten(entry)
        entry.context.close()

    def drop(self, entry: Entry) -> None:
        """Out of memory at once (another replica holds it now): closed unless a request is
        using it, which then finds it gone."""
        with self._lock:
            self._entries.pop(entry.id, None)
        with entry.mutex:
            busy, entry.busy = entry.busy, True
        if not busy:
            entry.context.close()

    # --- inside ----------------------------------------------------------------------------------

    def _removed(self, entry: Entry) -> None:
        """`entry` is out for good: nothing writes it again, and its snapshot goes."""
        if self.replication is not None:
            self.replication.removed(entry)
        else:
            entry.removed = True

    def _full(self) -> ApiError:
        return ApiError(
            429,
            f"{self.limit} contexts are open, the server's limit (--max-contexts): delete "
            "some, or retry once idle ones expire (--context-ttl)",
            retry_after=max(1, int(min(self.ttl, _RETRY_AFTER_S))),
        )

    def _reap_forever(self, interval: float) -> None:
        while True:
            time.sleep(interval)
            try:
                self.expire()
            except (OSError, LlamayError) as error:
                warn(f"expiring contexts: {error}")


def _missing(context_id: str) -> ApiError:
    return ApiError(404, f"no context {context_id[:80]!r}: list them at GET {PREFIX}/contexts")


def daemon(target: Callable[..., None], name: str, *args: Any) -> None:
    """Runs `target(*args)` in a daemon thread named `name`."""
    threading.Thread(target=target, args=args, name=name, daemon=True).start()


def warn(message: str) -> None:
    print(f"llamay: {message}", file=sys.stderr, flush=True)
