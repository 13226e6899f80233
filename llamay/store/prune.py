"""What the store holds that no name needs: blobs no manifest references, downloads that were
never finished, uploads never made into a model, temporary files of killed processes.

- `prune()` (`llamay prune`) removes all of it, under the store lock, so never a blob that a
  running pull has stored but not yet named.
- Uploaded blobs (the server's /api/blobs) are recorded in $LLAMAY_HOME/uploads.json until a
  manifest references them; the server bounds their total size (`pending_uploads`) and prunes
  those older than its upload TTL (`prune_uploads`). Only blobs uploaded through this home are
  touched that way: a blobs folder may be shared with other homes.
- `clean_stale_temporaries()` (at `llamay serve`) removes the temporary files and folders whose
  process is gone (they carry its id, paths.temp_prefix). Unfinished downloads are kept: the
  next pull of their name resumes them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from llamay.errors import PullError
from llamay.paths import llamay_home, stale, write_atomically
from llamay.store import manifests
from llamay.store.blobs import blob_path, check_digest
from llamay.store.builtin import PACKAGED
from llamay.store.locks import locked, store_lock
from llamay.store.paths import blobs_dir

# The temporary folders llamay makes in the system's temporary directory.
_TEMP_FOLDERS = ("llamay-snapshot", "llamay-restore", "llamay-verify")
_UPLOADS = "uploads.json"


@dataclass
class Pruned:
    """What prune removed (or, dry, would remove), and the bytes that frees."""

    blobs: list[Path] = field(default_factory=list)
    partials: list[Path] = field(default_factory=list)
    temporaries: list[Path] = field(default_factory=list)
    freed: int = 0


def prune(dry_run: bool = False) -> Pruned:
    """Remove every blob no stored name references (the built-in model's file stays),
    unfinished downloads, and stale temporary files. PullError while a pull or an upload is
    running (they hold the store lock): prune when they are done."""
    pruned = Pruned()
    with store_lock(exclusive=True, wait=False) as taken:
        if not taken:
            raise PullError("a pull or upload is running on this store; prune when it is done")
        referenced = referenced_digests()
        for path in sorted(blobs_dir().glob("sha256-*")):
            if path.name.endswith((".partial", ".validator")):
                pruned.partials.append(path)
            elif path.name.replace("-", ":", 1) not in referenced:
                pruned.blobs.append(path)
        pruned.partials += sorted(blobs_dir().glob("url-*.partial*"))
        for path in [*pruned.blobs, *pruned.partials]:
            pruned.freed += _size(path)
            if not dry_run:
                path.unlink(missing_ok=True)
        if not dry_run:
            _forget_uploads(set(_uploads()))
        pruned.temporaries = clean_stale_temporaries(dry_run)
    return pruned


def referenced_digests() -> set[str]:
    """The digests of every blob some stored name uses, and the built-in models'."""
    digests = {f"sha256:{model.sha256}" for model in PACKAGED.values()}
    for name in manifests.stored_names():
        raw = manifests.read_manifest(name)
        with contextlib.suppress(ValueError, KeyError, TypeError):
            digests.update(layer["digest"] for layer in manifests.layers_of(json.loads(raw or b"")))
    return digests


# --- uploads --------------------------------------------------------------------------------------


def track_upload(digest: str) -> None:
    """Record that blob `digest` was uploaded, to be pruned unless a manifest comes to use it."""
    check_digest(digest)
    with locked("uploads"):
        uploads = _uploads()
        uploads.setdefault(digest, time.time())
        _write_uploads(uploads)


def pending_uploads() -> list[tuple[str, int, float]]:
    """(digest, size, uploaded at) of each recorded upload no name uses yet; recorded uploads
    that a name has come to use, or that are gone, are forgotten."""
    uploads = _uploads()
    referenced = referenced_digests()
    pending, settled = [], set()
    for digest, uploaded_at in uploads.items():
        path = blob_path(digest)
        if digest in referenced or not path.is_file():
            settled.add(digest)
        else:
            pending.append((digest, _size(path), uploaded_at))
    if settled:
        _forget_uploads(settled)
    return pending


def prune_uploads(older_than: float) -> list[str]:
    """Delete the uploads no name uses that are older than `older_than` seconds; returns their
    digests. Nothing (an empty list) while a pull or another upload holds the store."""
    with store_lock(exclusive=True, wait=False) as taken:
        if not taken:
            return []
        cutoff = time.time() - older_than
        old = [digest for digest, _, at in pending_uploads() if at <= cutoff]
        for digest in old:
            blob_path(digest).unlink(missing_ok=True)
        _forget_uploads(set(old))
    return old


def _uploads() -> dict[str, float]:
    try:
        uploads = json.loads((llamay_home() / _UPLOADS).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(uploads, dict):
        return {}
    return {d: t for d, t in uploads.items() if isinstance(t, (int, float))}


def _forget_uploads(digests: set[str]) -> None:
    if not digests:
        return
    with locked("uploads"):
        uploads = _uploads()
        _write_uploads({d: t for d, t in uploads.items() if d not in digests})


def _write_uploads(uploads: dict[str, float]) -> None:
    encoded = json.dumps(uploads, indent=1).encode()
    write_atomically(llamay_home() / _UPLOADS, lambda out: out.write(encoded))


# --- temporaries ----------------------------------------------------------------------------------


def clean_stale_temporaries(dry_run: bool = False) -> list[Path]:
    """Remove the temporary files (`*.partial` of atomic writes and uploads) in the store and
    the temporary folders of snapshot transfers whose process is gone; returns them."""
    home = llamay_home()
    files = [*home.glob(".*.partial"), *blobs_dir().glob(".*.partial")]
    if manifests.manifests_dir().is_dir():
        files += manifests.manifests_dir().rglob(".*.partial")
    folders = [
        path
        for path in Path(tempfile.gettempdir()).glob("llamay-*")
        if path.name.startswith(_TEMP_FOLDERS) and path.is_dir() and not path.is_symlink()
    ]
    left = [path for path in [*files, *folders] if stale(path)]
    if not dry_run:
        for path in left:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    return left


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
