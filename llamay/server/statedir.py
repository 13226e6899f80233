"""The state directory replicas share (`llamay serve --state-dir DIR`): each context's files.

    DIR/contexts/ID/snapshot.llamay   the context (state/snapshot.py: tokens, KV pages, logits)
    DIR/contexts/ID/manifest.json     {"id", "model", "fingerprint", "n_tokens", "last_used",
                                       "owner", "kind"}: what a replica reads before restoring
    DIR/contexts/ID/lease.json        {"owner", "token", "expires"}: who may write this context
    DIR/contexts/ID/want              {"owner"}: another replica asks for the context
    DIR/contexts/ID/.lock             what lease changes lock (fcntl), a moment each

Every file is written atomically (paths.write_atomically: temp file, fsync, rename), so a reader
sees a whole old file or a whole new one. Ownership: a replica writes a context's files only
while it holds the context's lease; it renews the leases of the contexts it holds, and gives
them back when it lets a context go (drain, eviction, delete). A lease past its expiry is stale
(its holder died or hung) and the next replica takes it over; one held by the same replica name
is taken over at once (a restarted replica). A replica that needs a context another live
replica holds leaves a `want` file; the holder lets the context go (writes it, gives the lease
back) as soon as nothing runs in it, so a request routed to the "wrong" replica waits a moment
rather than failing. Lease changes read, decide and write under an
fcntl lock on `.lock`, which the kernel drops when a process dies (local disks and NFS with
locking), so no lock is ever left stale. Ids are opaque: they name no replica.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamay.errors import LlamayError
from llamay.paths import temp_prefix, write_atomically

# What may name a context in the directory: the ids the server makes (and a client sends back),
# never a path ("..", "/").
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_MAX_JSON = 64 * 1024
SNAPSHOT = "snapshot.llamay"
MANIFEST = "manifest.json"
LEASE = "lease.json"
WANT = "want"


class LeaseConflict(LlamayError):
    """Another live replica holds the context's lease."""

    def __init__(self, context_id: str, owner: str, expires: float) -> None:
        self.owner = owner
        self.expires = expires
        left = max(0.0, expires - time.time())
        super().__init__(
            f"context {context_id} is held by replica {owner!r} (its lease runs {left:.1f}s "
            "more, renewed while that replica lives): send the request there (the session "
            "header routes it), or retry once that replica is gone"
        )


@dataclass(frozen=True)
class Lease:
    owner: str
    token: str
    expires: float


def valid_id(context_id: str) -> bool:
    """Whether `context_id` may name a context in the directory (no path, bounded)."""
    return _ID.fullmatch(context_id) is not None


class StateDir:
    """One replica's view of the shared directory: `owner` names the replica in leases and
    manifests; leases last `lease_ttl` seconds from their last renewal."""

    def __init__(self, root: Path, owner: str, lease_ttl: float) -> None:
        self.root = Path(root)
        self.owner = owner
        self.lease_ttl = lease_ttl
        # This process's leases carry this token: a lease with it is ours.
        self.token = secrets.token_hex(8)
        self.contexts = self.root / "contexts"
        self.contexts.mkdir(parents=True, exist_ok=True)
        # fcntl locks belong to the process, so threads of one process take this one first.
        self._thread_lock = threading.Lock()

    def folder(self, context_id: str) -> Path:
        if not valid_id(context_id):
            raise ValueError(f"not a context id: {context_id[:80]!r}")
        return self.contexts / context_id

    def snapshot_path(self, context_id: str) -> Path:
        return self.folder(context_id) / SNAPSHOT

    # --- leases ----------------------------------------------------------------------------------

    def acquire(self, context_id: str) -> None:
        """Takes (or renews) the context's lease: free, stale, ours or our name's; LeaseConflict
        when another live replica holds it."""
        with self._locked(context_id, create=True) as folder:
            held = _read_lease(folder)
            if held is not None and not self._may_take(held):
                raise LeaseConflict(context_id, held.owner, held.expires)
            self._write_lease(folder)
            with contextlib.suppress(FileNotFoundError):
                (folder / WANT).unlink()

    def ask(self, context_id: str) -> None:
        """Asks the replica that holds the context to let it go once idle (the `want` file)."""
        folder = self.folder(context_id)
        record = json.dumps({"owner": self.owner}).encode()
        if folder.is_dir():  # (a folder deleted since holds only this file: nobody lists it)
            write_atomically(folder / WANT, lambda out: out.write(record))

    def wanted(self, context_id: str) -> bool:
        """Whether another replica asks for the context."""
        return (self.folder(context_id) / WANT).exists()

    def exists(self, context_id: str) -> bool:
        """Whether the context has a folder (it may still be being written by its creator)."""
        return self.folder(context_id).is_dir()

    def renew(self, context_id: str) -> bool:
        """Extends our lease; False (and nothing written) when it is no longer ours: another
        replica took it over after it went stale, or the context was deleted."""
        with self._locked(context_id) as folder:
            if folder is None:
                return False
            held = _read_lease(folder)
            if held is None or held.token != self.token:
                return False
            self._write_lease(folder)
            return True

    def release(self, context_id: str) -> None:
        """Gives our lease back (nothing if it is not ours)."""
        with self._locked(context_id) as folder:
            if folder is None:
                return
            held = _read_lease(folder)
            if held is not None and held.token == self.token:
                with contextlib.suppress(FileNotFoundError):
                    (folder / LEASE).unlink()

    def holds(self, context_id: str) -> bool:
        folder = self.folder(context_id)
        held = _read_lease(folder) if folder.is_dir() else None
        return held is not None and held.token == self.token

    def lease(self, context_id: str) -> Lease | None:
        folder = self.folder(context_id)
        return _read_lease(folder) if folder.is_dir() else None

    def _may_take(self, held: Lease) -> bool:
        return held.token == self.token or held.owner == self.owner or held.expires < time.time()

    def _write_lease(self, folder: Path) -> None:
        lease = {"owner": self.owner, "token": self.token, "expires": time.time() + self.lease_ttl}
        write_atomically(folder / LEASE, lambda out: out.write(json.dumps(lease).encode()))

    @contextlib.contextmanager
    def _locked(self, context_id: str, create: bool = False) -> Iterator[Path | None]:
        """The context's folder, under the lease lock (None: no such folder, unless `create`)."""
        folder = self.folder(context_id)
        with self._thread_lock:
            if create:
                folder.mkdir(exist_ok=True)
            try:
                fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            except (FileNotFoundError, NotADirectoryError):
                yield None
                return
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX)
                yield folder if folder.is_dir() else None
            finally:
                os.close(fd)  # drops the lock

    # --- contents --------------------------------------------------------------------------------

    def commit(self, context_id: str, write_snapshot: Any, manifest: dict[str, Any]) -> bool:
        """Writes the context's snapshot (through `write_snapshot(path)`) and its manifest, if
        we hold its lease; False (nothing written) when we no longer do."""
        if not self.holds(context_id):
            return False
        folder = self.folder(context_id)
        write_snapshot(folder / SNAPSHOT)
        self.write_manifest(context_id, manifest)
        return True

    def write_manifest(self, context_id: str, manifest: dict[str, Any]) -> None:
        record = {"id": context_id, "owner": self.owner, **manifest}
        data = json.dumps(record, sort_keys=True).encode()
        write_atomically(self.folder(context_id) / MANIFEST, lambda out: out.write(data))

    def manifest(self, context_id: str) -> dict[str, Any] | None:
        """The context's manifest; None when there is no such context (or only a part of one
        that a creation cut short wrote: no manifest, or no snapshot)."""
        folder = self.folder(context_id)
        if not (folder / SNAPSHOT).is_file():
            return None
        record = _read_json(folder / MANIFEST)
        if record is None:
            return None
        if not isinstance(record.get("model"), str) or not isinstance(
            record.get("fingerprint"), str
        ):
            raise LlamayError(
                f"{folder / MANIFEST}: not a context manifest (no model, fingerprint)"
            )
        return record

    def delete(self, context_id: str) -> None:
        """Removes the context's files (its lease last: nobody restores a half-deleted one)."""
        folder = self.folder(context_id)
        # Moved aside first, in one rename, so that no replica sees a part of it.
        grave = self.contexts / f".{temp_prefix('deleted')}{context_id}"
        try:
            os.rename(folder, grave)
        except FileNotFoundError:
            return
        shutil.rmtree(grave, ignore_errors=True)

    def ids(self) -> list[str]:
        """The ids of the contexts in the directory (whole ones: with a manifest)."""
        try:
            names = os.listdir(self.contexts)
        except FileNotFoundError:
            return []
        return sorted(
            name for name in names if valid_id(name) and (self.contexts / name / MANIFEST).is_file()
        )

    def writable(self) -> str | None:
        """None if a file can be written, fsynced and removed in the directory; else why not."""
        probe = self.root / f".ready-{self.owner.replace('/', '_')}"
        try:
            write_atomically(probe, lambda out: out.write(b"ok"))
            probe.unlink()
        except OSError as error:
            return f"{self.root}: {error.strerror or error}"
        return None


def _read_lease(folder: Path) -> Lease | None:
    try:
        record = _read_json(folder / LEASE)
    except LlamayError:
        return None  # a damaged lease holds nothing
    if record is None:
        return None
    try:
        return Lease(str(record["owner"]), str(record["token"]), float(record["expires"]))
    except (KeyError, TypeError, ValueError):
        return None  # a damaged lease holds nothing


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as source:
            data = source.read(_MAX_JSON + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if len(data) > _MAX_JSON:
        raise LlamayError(f"{path}: larger than a manifest or lease can be")
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise LlamayError(f"{path}: not JSON") from None
    if not isinstance(record, dict):
        raise LlamayError(f"{path}: not a JSON object")
    return record
