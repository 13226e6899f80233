"""Content-addressed blobs: blobs/sha256-<hex>, written once, verified before they get that name."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from llamay.errors import DigestMismatch, PullError
from llamay.paths import fsync_dir, temp_prefix
from llamay.store.locks import store_lock
from llamay.store.paths import blobs_dir

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_CHUNK = 1 << 20
# Writes that fail for want of room: a full disk, a quota, a file size limit.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def check_digest(digest: str) -> str:
    """`sha256:<64 hex>`, or PullError (a digest becomes a file name: nothing else gets through)."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise PullError(f"{digest!r} is not a sha256 digest (sha256:<64 hex digits>)")
    return digest


def blob_path(digest: str) -> Path:
    return blobs_dir() / check_digest(digest).replace(":", "-")


def has_blob(digest: str) -> bool:
    return blob_path(digest).is_file()


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while block := src.read(_CHUNK):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def commit(partial: Path, expected: str | None, what: str) -> str:
    """Give a finished download its content address; DigestMismatch (the bytes deleted) if its
    sha256 is not `expected`. Returns the digest."""
    actual = file_digest(partial)
    if expected is not None and actual != expected:
        partial.unlink()
        raise DigestMismatch(
            f"{what}: the downloaded bytes have {actual}, expected {expected}; they were deleted"
        )
    with open(partial, "rb+") as out:
        os.fsync(out.fileno())
    os.chmod(partial, 0o444)
    os.replace(partial, blob_path(actual))
    fsync_dir(partial.parent)
    return actual


def import_blob(digest: str, stream: BinaryIO | Iterable[bytes]) -> Path:
    """Store the bytes of `stream` (a binary file or an iterable of bytes) as blob `digest`.

    DigestMismatch if they hash to something else; nothing is stored then."""
    check_digest(digest)
    with store_lock(exclusive=False):  # prune must not take it before a name uses it
        fd, name = tempfile.mkstemp(
            prefix=temp_prefix(".import"), suffix=".partial", dir=blobs_dir()
        )
        os.close(fd)
        partial = Path(name)
        chunks = iter(lambda: stream.read(_CHUNK), b"") if hasattr(stream, "read") else stream
        try:
            with space_explained(partial), open(partial, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
            commit(partial, digest, f"blob {digest}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
    return blob_path(digest)


def put_bytes(data: bytes) -> str:
    """Store small bytes (a template, params) as a blob; returns its digest."""
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    if not has_blob(digest):
        import_blob(digest, [data])
    return digest


def import_file(path: Path) -> str:
    """Store a local file as a blob, by hard link when it is on the store's file system, else by
    copy. Returns its digest."""
    digest = file_digest(path)
    target = blob_path(digest)
    if target.exists():
        return digest
    try:
        os.link(path, target)
    except FileExistsError:
        pass  # stored meanwhile by another import of the same bytes
    except OSError:
        with open(path, "rb") as src:
            import_blob(digest, src)
    return digest


@contextlib.contextmanager
def space_explained(path: Path) -> Iterator[None]:
    """Turn a full disk while writing `path` into an error that says so (the caller cleans up)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise PullError(
                f"no space left to write {path} ({os.strerror(exc.errno)}); "
                "free some space and pull again"
            ) from None
        raise
