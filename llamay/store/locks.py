"""Locks across processes: two pulls of one name (or of one blob) take turns instead of colliding."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator

from llamay.store.paths import locks_dir


@contextlib.contextmanager
def locked(key: str) -> Iterator[None]:
    """Hold the exclusive lock named `key` (any string) for the duration of the block.

    flock locks die with their process, so a killed pull never leaves a stale lock behind; the
    holder deletes the lock file as it lets go, so no file is left behind either.
    """
    path = locks_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"
    while True:
        handle = open(path, "a")  # noqa: SIM115 (closed below, after the lock is released)
        fcntl.flock(handle, fcntl.LOCK_EX)
        # The holder before us deletes the file as it lets go: lock a file that is still there.
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    try:
        yield
    finally:
        path.unlink()
        handle.close()


@contextlib.contextmanager
def store_lock(exclusive: bool, wait: bool = True) -> Iterator[bool]:
    """The store-wide lock: held shared by whatever adds blobs and names (a pull, an upload, a
    create) for as long as it works, exclusively by prune, which must not take a blob a pull
    has stored but not yet named. Yields whether it was taken (always, with `wait`).

    Its file is never deleted: shared holders come and go, and none of them may be the last."""
    path = locks_dir() / "store.lock"
    with open(path, "a") as handle:
        flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(handle, flags if wait else flags | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
