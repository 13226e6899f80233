"""The fingerprint of a model file: what a snapshot names to say whose KV it holds.

A GGUF file is its metadata, its tensor table and its tensor bytes, so the fingerprint is the
sha256 of the whole file. Hashing a large file takes seconds, so each result is kept in a small
JSON cache under $LLAMAY_HOME, keyed by (device, inode, size, mtime): a file changed in place
gets a new mtime (or size) and is hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from llamay.paths import llamay_home, write_atomically

CACHE_NAME = "fingerprints.json"
CHUNK = 8 << 20


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of the file at path, from the cache when the file has not changed."""
    path = Path(path)
    info = path.stat()
    key = f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
    cache_path = llamay_home() / CACHE_NAME
    cache = _read_cache(cache_path)
    if key in cache:
        return cache[key]
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    cache[key] = digest.hexdigest()
    encoded = json.dumps(cache, indent=0, sort_keys=True).encode()
    write_atomically(cache_path, lambda out: out.write(encoded))
    return cache[key]


def _read_cache(cache_path: Path) -> dict[str, str]:
    """The cache, or an empty one when it is missing or unreadable (it is only a cache)."""
    try:
        cache = json.loads(cache_path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(cache, dict):
        return {}
    return {k: v for k, v in cache.items() if isinstance(k, str) and isinstance(v, str)}
