"""The store's folders under $LLAMAY_HOME (Ollama's layout): blobs/sha256-<hex>
(content-addressed, immutable), manifests/<host>/<namespace>/<model>/<tag> (JSON), locks/ (one
lock file per name or blob). Writing goes through llamay.paths.write_atomically."""

from __future__ import annotations

from pathlib import Path

from llamay.paths import llamay_home


def blobs_dir() -> Path:
    path = llamay_home() / "blobs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def manifests_dir() -> Path:
    return llamay_home() / "manifests"


def locks_dir() -> Path:
    path = llamay_home() / "locks"
    path.mkdir(parents=True, exist_ok=True)
    return path
