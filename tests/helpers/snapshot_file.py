"""Reading and rewriting snapshot files section by section, with valid checksums: what an
attacker who edits a snapshot does (docs/state-engine.md has the layout)."""

from __future__ import annotations

import hashlib
import struct

_HEADER = struct.Struct("<8sII")
_SECTION = struct.Struct("<4sQ32s")


def sections(data: bytes) -> dict[bytes, bytes]:
    """The payloads of a snapshot, by section name, in file order."""
    _, _, count = _HEADER.unpack_from(data)
    at, out = _HEADER.size, {}
    for _ in range(count):
        name, length, _ = _SECTION.unpack_from(data, at)
        at += _SECTION.size
        out[name] = data[at : at + length]
        at += length
    return out


def rebuilt(data: bytes, **payloads: bytes) -> bytes:
    """`data` with the sections named (META=, TOKS=, LOGT=, PAGE=) replaced, checksums
    recomputed: a file that passes every integrity check."""
    parts = sections(data)
    for name, payload in payloads.items():
        parts[name.encode()] = payload
    out = [data[: _HEADER.size]]
    for name, payload in parts.items():
        out.append(_SECTION.pack(name, len(payload), hashlib.sha256(payload).digest()) + payload)
    return b"".join(out)
