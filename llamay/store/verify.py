"""Checking stored bytes against their names: a blob is named by its sha256, so a flipped bit
on disk, a truncated copy or a file changed behind the store's back shows as a mismatch.

`intact(digest)` hashes the whole blob (`llamay ls --verify`, and every pull for the blobs it
found already stored). `intact_cached` remembers, by file identity (device, inode, size,
modification time), the blobs it found intact, in blobs/.verified.json: the built-in model is
checked so on every use, and hashed again only when its file has changed.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from llamay.paths import write_atomically
from llamay.store.blobs import blob_path, file_digest
from llamay.store.paths import blobs_dir

_CACHE = ".verified.json"


def intact(digest: str) -> bool:
    """Whether blob `digest` is stored and hashes to its name."""
    path = blob_path(digest)
    try:
        return file_digest(path) == digest
    except OSError:
        return False


def intact_cached(path: Path, digest: str) -> bool:
    """Whether the file at `path` hashes to `digest`, hashed only if it changed since it last
    did."""
    identity = _identity(path)
    if identity is None:
        return False
    if _read_cache().get(digest) == identity:
        return True
    try:
        if file_digest(path) != digest:
            return False
    except OSError:
        return False
    remember_intact(path, digest)
    return True


def remember_intact(path: Path, digest: str) -> None:
    """Record that the file at `path`, as it is now, hashes to `digest` (its maker hashed it)."""
    identity = _identity(path)
    if identity is None:
        return
    cache = _read_cache()
    cache[digest] = identity
    encoded = json.dumps(cache, indent=1).encode()
    with contextlib.suppress(OSError):  # a cache: a read-only store still works, hashing each time
        write_atomically(blobs_dir() / _CACHE, lambda out: out.write(encoded))


def _identity(path: Path) -> str | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"


def _read_cache() -> dict[str, str]:
    try:
        cache = json.loads((blobs_dir() / _CACHE).read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}
