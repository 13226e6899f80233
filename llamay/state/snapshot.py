"""Snapshots: a context's tokens, KV pages and last logits in one versioned file.

The layout (little-endian; docs/state-engine.md has it byte by byte):

    magic b"LLAMAYKV" | format version u32 | section count u32
    then the sections META, TOKS, LOGT, PAGE, each: name (4 ASCII bytes) | payload length u64
    | sha256 of the payload (32 bytes) | payload

META is UTF-8 JSON (the model fingerprint, the KV layout, the backend, its determinism class
and kernel set, the llamay version, the counts); TOKS the token ids as int32; LOGT the last logits as float32 (empty when the
context has none); PAGE the context's pages, raw, in position order.

Reading is all or nothing: the whole file is read and every section, checksum, count and value
is checked before a single page is allocated. A snapshot is untrusted input: its checksums only
say it is whole, not that its KV is what its tokens compute (state/context.py says what follows).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llamay._version import __version__
from llamay.errors import ContextOverflow, SnapshotCorrupt, SnapshotMismatch
from llamay.paths import write_atomically
from llamay.state.layout import KVLayout, ModelIdentity

MAGIC = b"LLAMAYKV"
FORMAT_VERSION = 1
SECTIONS = (b"META", b"TOKS", b"LOGT", b"PAGE")
_HEADER = struct.Struct("<8sII")
_SECTION = struct.Struct("<4sQ32s")
# META keys and their types; the layout keys must equal the restoring model's.
_META_TYPES = {
    "fingerprint": str,
    "model": str,
    "kv_dtype": str,
    "page_tokens": int,
    "n_layers": int,
    "n_kv_heads": int,
    "head_dim": int,
    "page_bytes": int,
    "kernels": str,
    "llamay_version": str,
    "n_tokens": int,
    "n_pages": int,
    "n_vocab": int,
}
_LAYOUT = ("kv_dtype", "page_tokens", "n_layers", "n_kv_heads", "head_dim", "page_bytes")
# Snapshots written before backends existed came from the CPU backend, in its first
# determinism class.
_DEFAULT_BACKEND = {"backend": "cpu", "determinism": "cpu"}


@dataclass(frozen=True)
class Snapshot:
    """A snapshot's contents, checked against the model that reads it."""

    tokens: list[int]
    logits: np.ndarray | None
    pages: memoryview  # n_pages pages of canonical bytes (state/layout.py)
    n_pages: int
    note: dict[str, Any] | None


def write(
    path: str | os.PathLike[str],
    identity: ModelIdentity,
    layout: KVLayout,
    tokens: Sequence[int],
    logits: np.ndarray | None,
    pages: Sequence[bytes],
    note: dict[str, Any] | None = None,
) -> None:
    """Writes a context's tokens, last logits and pages (canonical bytes, in position order)
    to path atomically (a reader sees the old file or the whole new one).

    `note`: a JSON object the application keeps with the context (the interactive chat keeps
    its conversation there); reading gives it back."""
    meta = layout.describe() | {
        "fingerprint": identity.fingerprint,
        "model": identity.name,
        "backend": identity.backend,
        "determinism": identity.determinism,
        "kernels": identity.kernels,
        "llamay_version": __version__,
        "n_tokens": len(tokens),
        "n_pages": len(pages),
        "n_vocab": identity.n_vocab,
    }
    payloads = {
        b"META": json.dumps(
            meta | ({} if note is None else {"note": note}), sort_keys=True
        ).encode(),
        b"TOKS": np.asarray(tokens, dtype="<i4").tobytes(),
        b"LOGT": b"" if logits is None else logits.astype("<f4").tobytes(),
        b"PAGE": b"".join(pages),
    }

    def fill(out: Any) -> None:
        out.write(_HEADER.pack(MAGIC, FORMAT_VERSION, len(SECTIONS)))
        for name in SECTIONS:
            payload = payloads[name]
            out.write(_SECTION.pack(name, len(payload), hashlib.sha256(payload).digest()))
            out.write(payload)

    write_atomically(Path(path), fill)


def read(
    path: str | os.PathLike[str], identity: ModelIdentity, layout: KVLayout, n_ctx: int
) -> Snapshot:
    """The snapshot at path, for the model of `identity` with KV `layout` and contexts of n_ctx
    tokens. Refuses a snapshot of other weights, of another determinism class or of another KV
    layout (SnapshotMismatch), and a damaged, tampered-with (every count, range and value
    checked: no non-finite K, V or logit) or newer-format file (SnapshotCorrupt). The whole
    file is read and checked before anything is returned."""
    path = Path(path)
    data = memoryview(path.read_bytes())
    sections = _sections(data, path)
    meta = _meta(sections[b"META"], path)
    _check_model(identity, layout, meta, path)
    return _contents(identity, layout, n_ctx, meta, sections, path)


def _sections(data: memoryview, path: Path) -> dict[bytes, memoryview]:
    """The payloads by name, each length and checksum checked."""
    if len(data) < _HEADER.size:
        raise SnapshotCorrupt(f"{path}: too short to be a llamay snapshot ({len(data)} bytes)")
    magic, version, count = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotCorrupt(f"{path}: not a llamay snapshot (bad magic {bytes(magic)!r})")
    if version > FORMAT_VERSION:
        raise SnapshotCorrupt(
            f"{path}: snapshot format version {version} is newer than this llamay "
            f"({__version__}) reads (version {FORMAT_VERSION}); upgrade llamay"
        )
    if version != FORMAT_VERSION or count != len(SECTIONS):
        raise SnapshotCorrupt(f"{path}: bad snapshot header (version {version}, {count} sections)")
    at = _HEADER.size
    sections = {}
    for expected in SECTIONS:
        if len(data) - at < _SECTION.size:
            raise SnapshotCorrupt(
                f"{path}: truncated before section {expected.decode()} (at byte {at})"
            )
        name, length, digest = _SECTION.unpack_from(data, at)
        if name != expected:
            raise SnapshotCorrupt(
                f"{path}: expected section {expected.decode()}, found {bytes(name)!r} (at byte {at})"
            )
        at += _SECTION.size
        if length > len(data) - at:
            raise SnapshotCorrupt(
                f"{path}: section {expected.decode()} is truncated: {length} bytes declared, "
                f"{len(data) - at} left (at byte {at})"
            )
        payload = data[at : at + length]
        if hashlib.sha256(payload).digest() != digest:
            raise SnapshotCorrupt(
                f"{path}: section {expected.decode()} fails its checksum: the file is damaged"
            )
        sections[expected] = payload
        at += length
    if at != len(data):
        raise SnapshotCorrupt(f"{path}: {len(data) - at} unexpected bytes after the last section")
    return sections


def _meta(payload: memoryview, path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(bytes(payload))
    except (ValueError, RecursionError):  # RecursionError: a hostile, deeply nested note
        raise SnapshotCorrupt(f"{path}: the META section is not JSON") from None
    if not isinstance(meta, dict):
        raise SnapshotCorrupt(f"{path}: the META section is not a JSON object")
    for key, kind in _META_TYPES.items():
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SnapshotCorrupt(f"{path}: META field {key!r} is missing or not a {kind.__name__}")
    if not isinstance(meta.get("note", {}), dict):
        raise SnapshotCorrupt(f"{path}: META field 'note' is not a JSON object")
    return meta


def _check_model(
    identity: ModelIdentity, layout: KVLayout, meta: dict[str, Any], path: Path
) -> None:
    """SnapshotMismatch unless the snapshot was written by these weights, on a backend of this
    determinism class (the kernel set may differ: every set of a class writes the same bits),
    with this KV layout."""
    if meta["fingerprint"] != identity.fingerprint:
        raise SnapshotMismatch(
            f"{path}: the snapshot is of other weights ({meta['model']}, fingerprint "
            f"{meta['fingerprint']}) than this model ({identity.name}, fingerprint "
            f"{identity.fingerprint}); restore it with the model that wrote it"
        )
    written = {key: meta.get(key, value) for key, value in _DEFAULT_BACKEND.items()}
    if not all(isinstance(value, str) for value in written.values()):
        raise SnapshotCorrupt(f"{path}: META fields 'backend' and 'determinism' must be strings")
    if written["determinism"] != identity.determinism:
        raise SnapshotMismatch(
            f"{path}: the snapshot was computed by the {written['backend']} backend "
            f"(determinism class {written['determinism']!r}), this model runs on the "
            f"{identity.backend} backend (class {identity.determinism!r}): their KV differ in "
            "the last bits; restore it on the backend that wrote it, or recompute the context"
        )
    ours = layout.describe()
    differ = [
        f"{key} {meta[key]} (this model: {ours[key]})" for key in _LAYOUT if meta[key] != ours[key]
    ]
    if differ:
        raise SnapshotMismatch(
            f"{path}: the snapshot's KV layout differs: {', '.join(differ)}; load the model with "
            "the kv_type and page_tokens it was saved with"
        )


def _contents(
    identity: ModelIdentity,
    layout: KVLayout,
    n_ctx: int,
    meta: dict[str, Any],
    sections: dict[bytes, memoryview],
    path: Path,
) -> Snapshot:
    """Tokens, logits and page bytes, their counts and values checked against META and the
    model."""
    n_tokens, n_pages, n_vocab = meta["n_tokens"], meta["n_pages"], identity.n_vocab
    if n_tokens < 0 or n_pages != math.ceil(n_tokens / layout.page_tokens):
        raise SnapshotCorrupt(f"{path}: {n_tokens} tokens cannot fill {n_pages} pages")
    if meta["n_vocab"] != n_vocab:
        raise SnapshotCorrupt(f"{path}: META says {meta['n_vocab']} tokens in the vocabulary")
    if len(sections[b"TOKS"]) != 4 * n_tokens:
        raise SnapshotCorrupt(f"{path}: the TOKS section does not hold {n_tokens} tokens")
    if len(sections[b"LOGT"]) not in (0, 4 * n_vocab):
        raise SnapshotCorrupt(f"{path}: the LOGT section does not hold {n_vocab} logits")
    if len(sections[b"PAGE"]) != n_pages * layout.page_bytes:
        raise SnapshotCorrupt(f"{path}: the PAGE section does not hold {n_pages} pages")
    tokens = np.frombuffer(sections[b"TOKS"], dtype="<i4")
    if n_tokens and (tokens.min() < 0 or tokens.max() >= n_vocab):
        raise SnapshotCorrupt(f"{path}: a token id is out of the vocabulary's range")
    if n_tokens > n_ctx:
        raise ContextOverflow(
            f"{path}: the snapshot holds {n_tokens} tokens, more than n_ctx = {n_ctx}; "
            "load the model with a larger n_ctx"
        )
    if not layout.finite(sections[b"PAGE"]):
        raise SnapshotCorrupt(f"{path}: the PAGE section holds a non-finite K or V value")
    logits = None
    if len(sections[b"LOGT"]):
        logits = np.frombuffer(sections[b"LOGT"], dtype="<f4").astype(np.float32)
        if not np.isfinite(logits).all():
            raise SnapshotCorrupt(f"{path}: the LOGT section holds a non-finite logit")
    return Snapshot(tokens.tolist(), logits, sections[b"PAGE"], n_pages, meta.get("note"))
