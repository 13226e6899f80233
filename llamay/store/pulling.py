"""`pull(NAME)`: fetch a model into the store, from wherever its name says, all or nothing.

The name's lock is held throughout, so a second pull of the same name waits, then finds every
blob stored and only rewrites the manifest. A failure leaves the name as it was: the manifest is
written last, after every blob is stored and verified; blobs found already stored are hashed
too, and fetched again if they are damaged. The store lock is held shared, so that prune never
takes a blob this pull stored but has not named yet.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from llamay.errors import DigestMismatch, ModelFormatError, PullError
from llamay.store import catalog
from llamay.store.blobs import blob_path, import_file
from llamay.store.builtin import packaged_model_path
from llamay.store.download import Fetcher
from llamay.store.huggingface import hf_fetcher, pull_huggingface
from llamay.store.locks import locked, store_lock
from llamay.store.manifests import MODEL, layers_of, make_manifest, parse_manifest
from llamay.store.names import ModelName, parse
from llamay.store.registry import pull_registry
from llamay.store.verify import intact


def pull(
    name: str, *, insecure: bool = False, progress: Callable[[dict], None] | None = None
) -> catalog.ModelEntry:
    """Pull `name` into the store and return its entry. `progress` receives Ollama's /api/pull
    events ({"status": ...}, with "digest", "total", "completed" while a blob downloads)."""
    parsed = parse(name)
    report = progress or (lambda event: None)
    if insecure and not parsed.custom_host:
        raise PullError(f"{name}: --insecure is only for HOST[:PORT]/NS/NAME[:TAG] names")
    if parsed.kind == "registry" and parsed.scheme == "http" and not insecure:
        raise PullError(f"{name}: a plain-http registry needs --insecure")
    with store_lock(exclusive=False), locked(f"name:{parsed.key}"):
        committed: list[str] = []
        try:
            raw = _fetch(parsed, insecure, report, committed)
            damaged = _damaged(raw, name, committed)
            if damaged:
                # Stored before this pull and no longer what their names say: fetched again.
                for digest in damaged:
                    blob_path(digest).unlink(missing_ok=True)
                raw = _fetch(parsed, insecure, report, committed)
                if _damaged(raw, name, committed):
                    raise PullError(f"{name}: a stored blob stays damaged after fetching it again")
        except DigestMismatch:
            # The layers verified so far belong to a model that will not be stored (other
            # failures keep them, for the next pull of the name to find).
            catalog.delete_unused(committed)
            raise
        report({"status": "writing manifest"})
        try:
            entry = catalog.store_manifest(parsed, raw)
        except ModelFormatError as exc:
            layers = layers_of(parse_manifest(raw, name))
            catalog.delete_unused(layer["digest"] for layer in layers)
            raise PullError(f"{name}: not a usable GGUF file ({exc}); nothing was stored") from None
        except OSError:  # no room for the manifest: nor for what was fetched for it
            catalog.delete_unused(committed)
            raise
    report({"status": "success"})
    return entry


def _damaged(raw: bytes, name: str, committed: list[str]) -> list[str]:
    """The blobs of manifest `raw` that were stored before this pull (the ones it downloaded
    were verified as they came) and do not hash to their digest."""
    layers = layers_of(parse_manifest(raw, name))
    return [
        layer["digest"]
        for layer in layers
        if layer["digest"] not in committed and not intact(layer["digest"])
    ]


def _fetch(
    name: ModelName, insecure: bool, report: Callable[[dict], None], committed: list[str]
) -> bytes:
    """Store every blob of `name` (adding the ones it downloads to `committed`); returns the
    manifest to give it."""
    packaged = catalog.builtin_model(name)
    if packaged is not None:
        packaged_model_path(packaged)  # assembled from the installed packages, no network
        return _manifest_of(f"sha256:{packaged.sha256}")
    if name.kind == "registry":
        with Fetcher(str(name), progress=report, committed=committed) as fetcher:
            return pull_registry(name, fetcher, insecure=insecure)
    if name.kind == "huggingface":
        with hf_fetcher(name, report, committed) as fetcher:
            return _manifest_of(pull_huggingface(name, fetcher))
    if name.kind == "url":
        with Fetcher(str(name), progress=report, committed=committed) as fetcher:
            digest, size = fetcher.probe(name.source)
            return _manifest_of(fetcher.blob(name.source, digest=digest, size=size))
    path = Path(name.source)
    if not path.is_file():
        raise PullError(f"{path}: no such file")
    return _manifest_of(import_file(path))


def _manifest_of(digest: str) -> bytes:
    return make_manifest([(MODEL, digest, blob_path(digest).stat().st_size)])
