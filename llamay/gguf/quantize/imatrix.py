"""Importance matrices: llama.cpp's imatrix files, in their GGUF form and the legacy `.dat`.

An importance matrix holds, for each weight matrix, the mean square of the activations each of
its columns met on some text (per expert, for expert tensors): the quantizers weight each
column's error by it. Reading one gives what llama-quantize's loader gives, value for value
(sums divided by counts in fp32), so the quantizers see the same weights.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from llamay.errors import ModelFormatError, ModelNotFound
from llamay.gguf.format import MAGIC, ValueType
from llamay.gguf.reader import read
from llamay.gguf.strings import StringArray
from llamay.gguf.writer import Typed, write

_SUMS, _COUNTS = ".in_sum2", ".counts"
DATASETS_KEY, CHUNK_COUNT_KEY, CHUNK_SIZE_KEY = (
    "imatrix.datasets",
    "imatrix.chunk_count",
    "imatrix.chunk_size",
)


@dataclass(frozen=True)
class ImportanceMatrix:
    """Per weight-matrix importance: float32, one value per column, expert after expert."""

    weights: dict[str, np.ndarray]
    datasets: list[str] = field(default_factory=list)
    chunk_count: int = 0


def read_imatrix(path: str | os.PathLike[str]) -> ImportanceMatrix:
    """Read an imatrix file of either form; ModelFormatError (one line, naming the file) when it
    is damaged, empty, or has values that are not finite."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise ModelNotFound(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{path}: is a directory, not an imatrix file") from None
    matrix = _read_gguf(path) if magic == MAGIC else _read_legacy(path)
    for name, values in matrix.weights.items():
        if not np.isfinite(values).all():
            raise ModelFormatError(
                f"{path}: the importance of {name} has a value that is not finite"
            )
    return matrix


def _read_gguf(path: Path) -> ImportanceMatrix:
    gg = read(path)
    meta = gg.metadata
    if not gg.tensors:
        raise ModelFormatError(f"{path}: an imatrix file with no data")
    if not all(key in meta for key in (DATASETS_KEY, CHUNK_COUNT_KEY, CHUNK_SIZE_KEY)):
        raise ModelFormatError(
            f"{path}: not an imatrix file: it lacks {DATASETS_KEY}, {CHUNK_COUNT_KEY} or "
            f"{CHUNK_SIZE_KEY}"
        )
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for name, tensor in gg.tensors.items():
        for suffix in (_SUMS, _COUNTS):
            if name.endswith(suffix) and len(name) > len(suffix):
                if tensor.type != "F32":
                    raise ModelFormatError(f"{path}: {name} is {tensor.type}; it must be F32")
                pairs.setdefault(name[: -len(suffix)], {})[suffix] = tensor.data.view("<f4")
    weights = {}
    for name, pair in pairs.items():
        if len(pair) != 2:
            raise ModelFormatError(
                f"{path}: {name} has sums without counts, or counts without sums"
            )
        weights[name] = _mean_squares(pair[_SUMS], pair[_COUNTS], path, name)
    datasets = meta[DATASETS_KEY]
    names = list(datasets) if isinstance(datasets, StringArray) else []
    chunk_count = meta[CHUNK_COUNT_KEY]
    return ImportanceMatrix(weights, names, chunk_count if isinstance(chunk_count, int) else 0)


def _mean_squares(sums: np.ndarray, counts: np.ndarray, path: Path, name: str) -> np.ndarray:
    """Each expert's sums over its count (ones where it saw no token), as llama-quantize's
    loader computes them: counts rounded half away from zero, the division in fp32."""
    if counts.size == 0:
        raise ModelFormatError(f"{path}: {name} has no counts")
    per_expert = sums.size // counts.size
    c = counts.astype(np.float64)
    rounded = (np.sign(c) * np.floor(np.abs(c) + 0.5)).astype(np.int64).astype(np.float32)
    values = np.zeros(sums.size, dtype=np.float32)
    used = sums[: per_expert * counts.size].reshape(counts.size, per_expert)
    seen = rounded > 0
    ratio = np.divide(used, rounded[:, None], where=seen[:, None], out=np.ones_like(used))
    values[: used.size] = ratio.reshape(-1)
    return values


class _Bytes:
    """A cursor over the legacy file's bytes; every read is bounds-checked."""

    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data, self.pos = path, data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ModelFormatError(
                f"{self.path}: truncated imatrix file: {what} needs {n} bytes at byte {self.pos}"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def i32(self, what: str) -> int:
        return struct.unpack("<i", self.take(4, what))[0]

    def text(self, n: int, what: str) -> str:
        raw = self.take(n, what).split(b"\0", 1)[0]  # a C string: up to the first NUL
        return raw.decode("utf-8", errors="replace")


def _read_legacy(path: Path) -> ImportanceMatrix:
    """The `.dat` form: int32 entry count; per entry int32 name length, the name, int32 calls,
    int32 value count, float32 values; then, optionally, int32 chunks and a dataset name."""
    buf = _Bytes(path, path.read_bytes())
    n_entries = buf.i32("the entry count") if buf.data else 0
    if n_entries < 1:
        raise ModelFormatError(f"{path}: not an imatrix file (no GGUF header, no entries)")
    weights = {}
    for i in range(n_entries):
        name = buf.text(buf.i32(f"entry {i}'s name length"), f"entry {i}'s name")
        n_call = buf.i32(f"{name}'s call count")
        n_values = buf.i32(f"{name}'s value count")
        if n_values < 1:
            raise ModelFormatError(f"{path}: {name} has {n_values} values")
        sums = np.frombuffer(buf.take(4 * n_values, f"{name}'s values"), dtype="<f4")
        # the values are stored multiplied by the calls: divide, in fp32
        weights[name] = (
            (sums / np.float32(n_call)).astype(np.float32) if n_call > 0 else sums.copy()
        )
    # optional, and read as far as it goes, as llama.cpp does
    chunk_count, datasets = 0, []
    if buf.remaining() >= 4:
        chunk_count = buf.i32("the chunk count")
        if buf.remaining() >= 4:
            length = buf.i32("the dataset's name length")
            if 0 < length <= buf.remaining():
                datasets.append(buf.text(length, "the dataset's name"))
    return ImportanceMatrix(weights, datasets, chunk_count)


def write_imatrix(
    path: str | os.PathLike[str],
    sums: Mapping[str, np.ndarray],
    counts: Mapping[str, Sequence[float]],
    *,
    datasets: Sequence[str] = (),
    chunk_count: int = 0,
    chunk_size: int = 512,
    legacy: bool = False,
) -> Path:
    """Write an imatrix file: per tensor, the sums of squared activations of each column
    (expert after expert) and the tokens each expert saw. `legacy` writes the `.dat` form
    instead: one count per tensor (the first of `counts[name]`, the calls), and `sums` stored
    as given, which in that form are the mean squares times the calls."""
    path = Path(path)
    if not legacy:
        tensors = {}
        for name, values in sums.items():
            n_counts = len(counts[name])
            tensors[name + _SUMS] = np.asarray(values, np.float32).reshape(n_counts, -1)
            tensors[name + _COUNTS] = np.asarray(counts[name], np.float32).reshape(n_counts, 1)
        metadata = {
            "general.type": "imatrix",
            DATASETS_KEY: Typed(list(datasets), ValueType.STRING),
            CHUNK_COUNT_KEY: Typed(chunk_count, ValueType.UINT32),
            CHUNK_SIZE_KEY: Typed(chunk_size, ValueType.UINT32),
        }
        return write(path, metadata, tensors)
    parts = [struct.pack("<i", len(sums))]
    for name, values in sums.items():
        raw = name.encode()
        flat = np.asarray(values, "<f4").reshape(-1)
        parts.append(struct.pack("<i", len(raw)) + raw)
        parts.append(struct.pack("<ii", int(counts[name][0]), flat.size) + flat.tobytes())
    dataset = datasets[0].encode() if datasets else b""
    parts.append(struct.pack("<ii", chunk_count, len(dataset)) + dataset)
    path.write_bytes(b"".join(parts))
    return path
