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
