"""Snapshots: a context's tokens, KV pages and last logits in one versioned file.

The layout (little-endian; docs/state-engine.md has it byte by byte):

    magic b"LLAMAYKV" | format version u32 | section count u32
    then the sections META, TOKS, LOGT, PAGE, each: name (4 ASCII bytes) | payload length u64
    | sha256 of the payload (32 bytes) | payload

META is UTF-8 JSON (the model fingerprint, the KV layout, the kernel set, the llamay version,
the counts); TOKS the token ids as int32; LOGT the last logits as float32 (empty when the
context has none); PAGE the context's pages, raw, in position order.

Restoring is all or nothing: the whole file is read and every section, checksum and count is
checked before a single page is allocated. A snapshot is untrusted input (its checksums only
say it is whole, not who made it): its K/V and logits must be finite, and its pages are never
shared through the prefix tree unless `verify` recomputed them and found them equal.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from llamay._version import __version__
from llamay.errors import ContextOverflow, SnapshotCorrupt, SnapshotMismatch
from llamay.store.paths import write_atomically

if TYPE_CHECKING:
    from llamay.engine.context import Context
    from llamay.engine.model import Model

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


def save(ctx: Context, path: str | os.PathLike[str], note: dict[str, Any] | None = None) -> None:
    """Writes ctx to path atomically (a reader sees the old file or the whole new one).

    `note`: a JSON object the application keeps with the context (the interactive chat keeps
    its conversation there); restore gives it back as `ctx.note`."""
    model = ctx.model
    with model._lock:
        pages = ctx._page_table().tolist()
        payloads = {
            b"META": json.dumps(
                _layout(model)
                | {
                    "fingerprint": model.fingerprint,
                    "model": model.path.name,
                    "kernels": model.kernels,
                    "llamay_version": __version__,
                    "n_tokens": ctx.n_tokens,
                    "n_pages": len(pages),
                    "n_vocab": model.n_vocab,
                }
                | ({} if note is None else {"note": note}),
                sort_keys=True,
            ).encode(),
            b"TOKS": np.asarray(ctx._tokens, dtype="<i4").tobytes(),
            b"LOGT": b"" if ctx._logits is None else ctx._logits.astype("<f4").tobytes(),
            b"PAGE": b"".join(model.pool.read_page(page) for page in pages),
        }

    def fill(out: Any) -> None:
        out.write(_HEADER.pack(MAGIC, FORMAT_VERSION, len(SECTIONS)))
        for name in SECTIONS:
            payload = payloads[name]
            out.write(_SECTION.pack(name, len(payload), hashlib.sha256(payload).digest()))
            out.write(payload)

    write_atomically(Path(path), fill)


def restore(model: Model, path: str | os.PathLike[str], verify: bool = False) -> Context:
    """The context saved at path, for model; see the module docstring for what is refused.

    The snapshot's pages are untrusted: they are written into the context's own pages, which
    never go into the prefix tree (ctx.shares_prefix is False). With `verify` the KV is instead
    recomputed from the tokens and compared with the snapshot's (`_verified`)."""
    from llamay.engine.context import Context

    path = Path(path)
    data = memoryview(path.read_bytes())
    sections = _sections(data, path)
    meta = _meta(sections[b"META"], path)
    _check_model(model, meta, path)
    tokens, logits, page_data = _contents(model, meta, sections, path)
    if verify:
        return _verified(model, meta, tokens, logits, page_data, path)

    ctx = Context(model)
    ctx.note = meta.get("note")
    ctx.shares_prefix = False
    with model._lock:
        model._make_room(meta["n_pages"])  # or ContextOverflow, nothing allocated
        pages = model.pool.arena.alloc_many(meta["n_pages"])
        for i, page in enumerate(pages.tolist()):
            size = meta["page_bytes"]
            model.pool.write_page(page, page_data[i * size : (i + 1) * size])
        ctx._add_pages(pages)
        ctx._append(tokens, logits)
    return ctx


def _verified(
    model: Model,
    meta: dict[str, Any],
    tokens: list[int],
    logits: np.ndarray | None,
    page_data: memoryview,
    path: Path,
) -> Context:
    """A context of the snapshot's tokens, computed here, once its KV and logits are found to
    equal the snapshot's bit for bit (the engine writes the same bits however a prefix was
    computed, docs/state-engine.md); SnapshotCorrupt, and nothing kept, if any differ."""
    from llamay.engine.context import Context

    ctx = Context(model)
    try:
        if tokens:
            ctx.feed(tokens)
        differs = _first_difference(model, meta, ctx, page_data)
        if (
            differs is None
            and logits is not None
            and not np.array_equal(logits.view(np.uint32), ctx._logits.view(np.uint32))
        ):
            differs = "the logits"
    except BaseException:
        ctx.close()
        raise
    if differs is not None:
        ctx.close()
        raise SnapshotCorrupt(
            f"{path}: {differs}: not what these weights compute for the snapshot's tokens "
            "(a recompute differs)"
        )
    ctx.note = meta.get("note")
    return ctx


def _first_difference(
    model: Model, meta: dict[str, Any], ctx: Context, page_data: memoryview
) -> str | None:
    """Which page of the snapshot holds other bits than ctx's over the context's positions."""
    size = meta["page_bytes"]
    with model._lock:
        for i, page in enumerate(ctx._page_table().tolist()):
            ours = _slots(model, model.pool.read_page(page), i, meta["n_tokens"], raw=True)
            theirs = _slots(
                model, page_data[i * size : (i + 1) * size], i, meta["n_tokens"], raw=True
            )
            if not np.array_equal(ours, theirs):
                return f"page {i}"
    return None


def _slots(
    model: Model, page: bytes | memoryview, index: int, n_tokens: int, raw: bool = False
) -> np.ndarray:
    """The K and V values of page `index` of a context of n_tokens tokens, over the positions
    it holds (a last page's slots past n_tokens hold stale values that nothing reads), as
    floats or (raw) as their bits: (layers, K/V, kv heads, positions, head_dim)."""
    arena = model.pool.arena
    width = 2 if arena.dtype == "F16" else 4
    dtype = (np.uint16 if width == 2 else np.uint32) if raw else ("<f2" if width == 2 else "<f4")
    values = np.frombuffer(page, dtype=dtype).reshape(
        arena.n_layers, 2, arena.n_kv_heads, arena.page_tokens, arena.head_dim
    )
    held = min(arena.page_tokens, n_tokens - index * arena.page_tokens)
    return values[:, :, :, :held, :]


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
    except (ValueError, RecursionError):  # RecursionError: a note nested thousands deep
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


def _check_model(model: Model, meta: dict[str, Any], path: Path) -> None:
    """SnapshotMismatch unless the snapshot was written by these weights with this KV layout
    (the kernel set may differ: every set writes the same bits)."""
    if meta["fingerprint"] != model.fingerprint:
        raise SnapshotMismatch(
            f"{path}: the snapshot is of other weights ({meta['model']}, fingerprint "
            f"{meta['fingerprint']}) than this model ({model.path.name}, fingerprint "
            f"{model.fingerprint}); restore it with the model that wrote it"
        )
    ours = _layout(model)
    differ = [
        f"{key} {meta[key]} (this model: {ours[key]})" for key in _LAYOUT if meta[key] != ours[key]
    ]
    if differ:
        raise SnapshotMismatch(
            f"{path}: the snapshot's KV layout differs: {', '.join(differ)}; load the model with "
            "the kv_type and page_tokens it was saved with"
        )


def _contents(
    model: Model, meta: dict[str, Any], sections: dict[bytes, memoryview], path: Path
) -> tuple[list[int], np.ndarray | None, memoryview]:
    """Tokens, logits and page bytes, their counts checked against META and the model."""
    n_tokens, n_pages = meta["n_tokens"], meta["n_pages"]
    if n_tokens < 0 or n_pages != math.ceil(n_tokens / model.page_tokens):
        raise SnapshotCorrupt(f"{path}: {n_tokens} tokens cannot fill {n_pages} pages")
    if meta["n_vocab"] != model.n_vocab:
        raise SnapshotCorrupt(f"{path}: META says {meta['n_vocab']} tokens in the vocabulary")
    if len(sections[b"TOKS"]) != 4 * n_tokens:
        raise SnapshotCorrupt(f"{path}: the TOKS section does not hold {n_tokens} tokens")
    if len(sections[b"LOGT"]) not in (0, 4 * model.n_vocab):
        raise SnapshotCorrupt(f"{path}: the LOGT section does not hold {model.n_vocab} logits")
    if len(sections[b"PAGE"]) != n_pages * meta["page_bytes"]:
        raise SnapshotCorrupt(f"{path}: the PAGE section does not hold {n_pages} pages")
    tokens = np.frombuffer(sections[b"TOKS"], dtype="<i4")
    if n_tokens and (tokens.min() < 0 or tokens.max() >= model.n_vocab):
        raise SnapshotCorrupt(f"{path}: a token id is out of the vocabulary's range")
    if n_tokens > model.n_ctx:
        raise ContextOverflow(
            f"{path}: the snapshot holds {n_tokens} tokens, more than n_ctx = {model.n_ctx}; "
            "load the model with a larger n_ctx"
        )
    logits = None
    if len(sections[b"LOGT"]):
        logits = np.frombuffer(sections[b"LOGT"], dtype="<f4").astype(np.float32)
        if not np.isfinite(logits).all():
            raise SnapshotCorrupt(f"{path}: the logits hold NaN or infinite values")
    page_data = sections[b"PAGE"]
    size = meta["page_bytes"]
    for i in range(n_pages):
        if not np.isfinite(_slots(model, page_data[i * size : (i + 1) * size], i, n_tokens)).all():
            raise SnapshotCorrupt(f"{path}: page {i} holds NaN or infinite keys or values")
    return tokens.tolist(), logits, page_data


def _layout(model: Model) -> dict[str, Any]:
    arena = model.pool.arena
    return {
        "kv_dtype": arena.dtype,
        "page_tokens": arena.page_tokens,
        "n_layers": arena.n_layers,
        "n_kv_heads": arena.n_kv_heads,
        "head_dim": arena.head_dim,
        "page_bytes": arena.page_bytes,
    }
