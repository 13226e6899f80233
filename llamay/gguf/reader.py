"""Read a GGUF file: mmap it, parse and validate the header, and view tensors without copying.

Every count and offset in the file is untrusted: each is checked against the bytes that remain
before anything is allocated from it, and every failure names the file and the byte offset.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llamay.errors import ModelFormatError, ModelNotFound
from llamay.gguf.format import (
    DEFAULT_ALIGNMENT,
    MAGIC,
    MAX_DIMS,
    SCALAR_DTYPES,
    VERSIONS,
    ValueType,
)
from llamay.gguf.strings import StringArray
from llamay.gguf.types import BY_ID, GGMLType

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# Smallest encoding of one value of each type: bounds how many items the remaining bytes can hold.
_MIN_BYTES = {t: d.itemsize for t, d in SCALAR_DTYPES.items()}
_MIN_BYTES[ValueType.STRING] = 8
_MIN_BYTES[ValueType.ARRAY] = 12


@dataclass(frozen=True)
class FileSpan:
    """Where a tensor's bytes lie in its file, to read them again without mapping them: a read
    copies from the page cache, while a page touched through the mapping stays in the process's
    resident set (with the kernel's fault-around, 64 KiB for each row touched)."""

    path: Path
    start: int  # absolute byte offset of the tensor's first byte
    identity: tuple[int, int, int, int]  # the file's st_dev, st_ino, st_size, st_mtime_ns

    def open(self) -> int:
        """A read-only descriptor of the file, which must be the one parsed; ModelFormatError
        when it has been replaced or rewritten since."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            raise ModelFormatError(f"{self.path}: cannot reopen: {error.strerror}") from None
        if _identity(os.fstat(fd)) != self.identity:
            os.close(fd)
            raise ModelFormatError(f"{self.path}: the file changed while the model was loading")
        return fd


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(eq=False)
class Tensor:
    """One tensor of a GGUF file; `data` is a read-only view of the mapped bytes (no copy)."""

    name: str
    ggml_type: GGMLType
    shape: tuple[int, ...]  # GGUF order: the fastest-varying dimension first
    offset: int  # as stored: relative to the start of the data section
    data: np.ndarray = field(repr=False)  # uint8, exactly the tensor's bytes
    span: FileSpan | None = field(default=None, repr=False)  # where `data` lies in the file

    @property
    def type(self) -> str:
        return self.ggml_type.name

    @property
    def type_id(self) -> int:
        return self.ggml_type.id

    @property
    def n_elements(self) -> int:
        return _product(self.shape)

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def dequantize(self) -> np.ndarray:
        """The tensor as float32, in numpy order (the reverse of the GGUF shape)."""
        from llamay.gguf.quant import dequantize

        return dequantize(self.data, self.ggml_type, shape=self.shape[::-1])


@dataclass(eq=False)
class GGUFFile:
    """A parsed GGUF file. Tensor views keep the mapping alive; `close()` is optional."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, Tensor]
    alignment: int
    data_offset: int  # absolute byte offset of the data section
    _map: mmap.mmap | None = field(default=None, repr=False)

    @property
    def architecture(self) -> str | None:
        return self.metadata.get("general.architecture")

    def value_type(self, key: str) -> ValueType:
        """The GGUF value type a metadata key was stored with."""
        return self._value_types[key]

    def typed_metadata(self) -> dict[str, Any]:
        """The metadata with each scalar's stored type attached, for writing it back unchanged."""
        from llamay.gguf.writer import Typed

        return {
            key: Typed(value, self._value_types[key])
            if self._value_types[key] not in (ValueType.ARRAY, ValueType.STRING)
            else value
            for key, value in self.metadata.items()
        }

    _value_types: dict[str, ValueType] = field(default_factory=dict, repr=False)


def read(path: str | os.PathLike[str]) -> GGUFFile:
    """Parse and validate a GGUF file. Raises ModelFormatError (naming file and offset) if bad."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise ModelNotFound(f"{path}: no such file") from None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if stat.S_ISDIR(st.st_mode):
            raise ModelFormatError(f"{path}: is a directory, not a GGUF file")
        if not stat.S_ISREG(st.st_mode):
            raise ModelFormatError(f"{path}: is not a regular file")
        if size == 0:
            raise ModelFormatError(f"{path}: empty file, not a GGUF file")
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        identity = _identity(st)
    finally:
        os.close(fd)
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        # The header is read once; tensor pages are faulted in by the kernels, not read ahead.
        mapped.madvise(mmap.MADV_RANDOM, 0, min(size, 1 << 20))
    try:
        gguf = _Parser(path, mapped, identity).parse()
    except ModelFormatError:
        with contextlib.suppress(BufferError):  # views made before the error keep it mapped
            mapped.close()
        raise
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        # The metadata is copied out (a vocabulary's strings are megabytes): drop its pages.
        header_pages = gguf.data_offset // mmap.PAGESIZE * mmap.PAGESIZE
        if header_pages:
            mapped.madvise(mmap.MADV_DONTNEED, 0, header_pages)
    return gguf


class _Parser:
    def __init__(self, path: Path, buf: mmap.mmap, identity: tuple[int, int, int, int]) -> None:
        self.path = path
        self.buf = buf
        self.identity = identity
        self.absolute = path.absolute()  # reopened later, perhaps from another working folder
        self.size = len(buf)
        self.pos = 0

    # --- errors -----------------------------------------------------------------------------
    def fail(self, message: str, at: int | None = None) -> ModelFormatError:
        at = self.pos if at is None else at
        return ModelFormatError(f"{self.path}: {message} (at byte {at})")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(
                f"truncated: {what} needs {n} bytes but the file ends at byte {self.size}"
            )

    # --- primitives -------------------------------------------------------------------------
    def u32(self, what: str) -> int:
        self.need(4, what)
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self, what: str) -> int:
        self.need(8, what)
        (v,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def count(self, what: str, item_bytes: int) -> int:
        """A uint64 count, refused if the remaining bytes cannot hold that many items."""
        at = self.pos
        n = self.u64(what)
        if n * item_bytes > self.size - self.pos:
            raise self.fail(
                f"{what} is {n}, more than the {self.size - self.pos} remaining bytes can hold "
                "(truncated or corrupt file)",
                at,
            )
        return n

    def string(self, what: str) -> str:
        at = self.pos
        n = self.count(f"length of {what}", 1)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8", at) from None

    def value_type(self, what: str) -> ValueType:
        at = self.pos
        code = self.u32(f"type of {what}")
        try:
            return ValueType(code)
        except ValueError:
            raise self.fail(f"unknown metadata value type {code} for {what}", at) from None

    # --- metadata values --------------------------------------------------------------------
    def value(self, vtype: ValueType, what: str) -> Any:
        if vtype is ValueType.STRING:
            return self.string(what)
        if vtype is ValueType.ARRAY:
            return self.array(what)
        dtype = SCALAR_DTYPES[vtype]
        self.need(dtype.itemsize, what)
        v = np.frombuffer(self.buf, dtype, 1, self.pos)[0]
        self.pos += dtype.itemsize
        if vtype is ValueType.BOOL:
            return bool(v)
        return float(v) if dtype.kind == "f" else int(v)

    def array(self, what: str) -> Any:
        item_type = self.value_type(f"items of {what}")
        n = self.count(f"item count of {what}", _MIN_BYTES[item_type])
        if item_type is ValueType.STRING:
            return self.string_array(n, what)
        if item_type is ValueType.ARRAY:
            return [self.array(f"{what}[{i}]") for i in range(n)]
        dtype = SCALAR_DTYPES[item_type]
        values = np.frombuffer(self.buf, dtype, n, self.pos).copy()
        self.pos += n * dtype.itemsize
        return values.astype(bool) if item_type is ValueType.BOOL else values

    def string_array(self, n: int, what: str) -> StringArray:
        # Vocabularies hold 250k+ strings: one tight loop, and no object kept per string.
        buf, size, pos = self.buf, self.size, self.pos
        first = pos
        unpack = _U64.unpack_from
        blob = bytearray()
        offsets = np.zeros(n + 1, dtype=np.int64)
        try:
            for i in range(n):
                (length,) = unpack(buf, pos)
                pos += 8
                end = pos + length
                if end > size:
                    raise IndexError
                blob += buf[pos:end]
                offsets[i + 1] = len(blob)
                pos = end
        except (IndexError, struct.error):
            self.pos = pos
            raise self.fail(f"truncated: {what}[{i}] runs past the end of the file") from None
        bad = _first_invalid_utf8(blob, offsets)
        if bad is not None:
            at = first + 8 * (bad + 1) + int(offsets[bad])  # the string's first byte
            raise self.fail(f"{what}[{bad}] is not valid UTF-8", at)
        self.pos = pos
        return StringArray(bytes(blob), offsets)

    # --- the file ---------------------------------------------------------------------------
    def parse(self) -> GGUFFile:
        self.need(4, "the magic number")
        magic = bytes(self.buf[0:4])
        if magic != MAGIC:
            # The bytes found are not named: the file may be anything (a server's error about a
            # client's path must tell nothing of it).
            raise self.fail(f"not a GGUF file: it does not begin with {MAGIC!r}", 0)
        self.pos = 4
        version = self.u32("the version")
        if version not in VERSIONS:
            if version & 0xFFFF == 0 and (version >> 24) in VERSIONS:
                raise self.fail("big-endian GGUF files are not supported", 4)
            raise self.fail(
                f"unsupported GGUF version {version} (llamay reads versions 2 and 3)", 4
            )
        n_tensors = self.count("tensor count", 8 + 4 + 4 + 8)
        n_kv = self.count("metadata count", 8 + 4)

        metadata: dict[str, Any] = {}
        value_types: dict[str, ValueType] = {}
        for _ in range(n_kv):
            at = self.pos
            key = self.string("metadata key")
            if key in metadata:
                raise self.fail(f"duplicate metadata key {key!r}", at)
            vtype = self.value_type(key)
            metadata[key] = self.value(vtype, key)
            value_types[key] = vtype

        alignment = self.alignment(metadata, value_types)
        infos = [self.tensor_info() for _ in range(n_tensors)]
        data_offset = -(-self.pos // alignment) * alignment
        tensors = self.place_tensors(infos, data_offset, alignment)
        return GGUFFile(
            path=self.path,
            version=version,
            metadata=metadata,
            tensors=tensors,
            alignment=alignment,
            data_offset=data_offset,
            _map=self.buf,
            _value_types=value_types,
        )

    def alignment(self, metadata: dict[str, Any], value_types: dict[str, ValueType]) -> int:
        value = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        vtype = value_types.get("general.alignment", ValueType.UINT32)
        integer_types = {ValueType.UINT8, ValueType.UINT16, ValueType.UINT32, ValueType.UINT64}
        if vtype not in integer_types or value <= 0 or value & (value - 1):
            raise self.fail(f"general.alignment must be a power of two, got {value!r}")
        return value

    def tensor_info(self) -> tuple[str, tuple[int, ...], GGMLType, int, int]:
        at = self.pos
        name = self.string("tensor name")
        n_dims = self.u32(f"dimension count of {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise self.fail(
                f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)", at
            )
        shape = tuple(self.u64(f"shape of {name!r}") for _ in range(n_dims))
        if _product(shape) >= 1 << 62:
            raise self.fail(f"tensor {name!r} has an absurd shape {shape}", at)
        type_at = self.pos
        type_id = self.u32(f"type of {name!r}")
        ggml_type = BY_ID.get(type_id)
        if ggml_type is None:
            raise self.fail(f"tensor {name!r} has unknown ggml type id {type_id}", type_at)
        if shape[0] % ggml_type.block_elems:
            raise self.fail(
                f"tensor {name!r}: first dimension {shape[0]} is not a multiple of the "
                f"{ggml_type.name} block size {ggml_type.block_elems}",
                at,
            )
        offset = self.u64(f"data offset of {name!r}")
        return name, shape, ggml_type, offset, at

    def place_tensors(self, infos, data_offset: int, alignment: int) -> dict[str, Tensor]:
        tensors: dict[str, Tensor] = {}
        spans = []
        for name, shape, ggml_type, offset, at in infos:
            if name in tensors:
                raise self.fail(f"duplicate tensor name {name!r}", at)
            if offset % alignment:
                raise self.fail(
                    f"tensor {name!r} data offset {offset} is not aligned to {alignment}", at
                )
            nbytes = ggml_type.nbytes(_product(shape))
            start = data_offset + offset
            if start + nbytes > self.size:
                raise self.fail(
                    f"tensor {name!r} ({nbytes} bytes at {start}) runs past the end of the "
                    f"file ({self.size} bytes): the file is truncated",
                    at,
                )
            data = np.frombuffer(self.buf, np.uint8, nbytes, start)
            span = FileSpan(self.absolute, start, self.identity)
            tensors[name] = Tensor(name, ggml_type, shape, offset, data, span)
            spans.append((offset, offset + nbytes, name, at))
        spans.sort()
        for (_, prev_end, prev, _), (start, _, name, at) in itertools.pairwise(spans):
            if start < prev_end:
                raise self.fail(f"tensor {name!r} overlaps tensor {prev!r}", at)
        return tensors


def plain_value(value: Any) -> Any:
    """A metadata value as plain Python, as JSON holds it: arrays (numbers, strings, arrays of
    arrays) as lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, StringArray)):
        return [plain_value(item) for item in value]
    return value


def _first_invalid_utf8(blob: bytearray, offsets: np.ndarray) -> int | None:
    """The first string of the array that is not valid UTF-8, or None.

    The strings are all valid when their concatenation is and none begins inside a character
    (on a continuation byte): each then ends where a character does. Otherwise the first
    invalid one is the string where the decoder fails, the first string that begins on a
    continuation byte, or the one before that (when it was cut off mid-character)."""

    def at(byte: int) -> int:  # the string holding byte `byte`
        return int(np.searchsorted(offsets, byte, side="right")) - 1

    invalid = []
    try:
        blob.decode("utf-8")
    except UnicodeDecodeError as error:
        invalid.append(at(error.start))
    starts = offsets[:-1][np.diff(offsets) > 0]
    inside = starts[(np.frombuffer(blob, np.uint8)[starts] & 0xC0) == 0x80]
    if inside.size:
        first = at(int(inside[0]))
        invalid.append(first)
        before = at(int(inside[0]) - 1)  # the last string with a byte before it
        try:
            blob[offsets[before] : offsets[before + 1]].decode("utf-8")
        except UnicodeDecodeError:
            invalid.append(before)
    return min(invalid, default=None)


def _product(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
