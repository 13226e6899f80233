"""Write GGUF files: metadata of every value type and tensors of any ggml type.

Tests use it to synthesize small models; tools use it to rewrite files; `write_streamed`
writes tensors one after another as they are made (`llamay quantize`), never all in memory.
The file is written atomically (temp file, fsync, rename), so a failed or interrupted write
never leaves half a model behind.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from llamay.gguf.format import DEFAULT_ALIGNMENT, MAGIC, SCALAR_DTYPES, ValueType
from llamay.gguf.reader import Tensor
from llamay.gguf.strings import StringArray
from llamay.gguf.types import BY_NAME, GGMLType
from llamay.paths import write_atomically


@dataclass(frozen=True)
class Typed:
    """A metadata value with an explicit GGUF type: `Typed(4096, ValueType.UINT32)`.

    For arrays, `type` is the item type: `Typed([1, 2], ValueType.UINT8)`.
    """

    value: Any
    type: ValueType


@dataclass(frozen=True)
class RawTensor:
    """Tensor bytes already in a ggml format; `shape` in GGUF order."""

    type: str
    shape: tuple[int, ...]
    data: np.ndarray  # uint8


@dataclass(frozen=True)
class TensorInfo:
    """A tensor's entry in the file's table, its bytes to come: `shape` in GGUF order."""

    name: str
    type: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return BY_NAME[self.type].nbytes(math.prod(self.shape))


TensorLike = np.ndarray | RawTensor | Tensor | tuple[str, np.ndarray]

_NUMPY_TO_VALUE = {
    dtype: vtype for vtype, dtype in SCALAR_DTYPES.items() if vtype != ValueType.BOOL
}
_NUMPY_TO_VALUE[np.dtype(bool)] = ValueType.BOOL


def write(
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    tensors: Mapping[str, TensorLike] | None = None,
    *,
    alignment: int | None = None,
    version: int = 3,
) -> Path:
    """Write a GGUF file.

    Metadata values are typed from Python (bool → BOOL, int → INT32 or INT64, float → FLOAT32,
    str → STRING, lists → ARRAY), from numpy dtypes, or explicitly with `Typed`.
    Tensors may be float32/float16 numpy arrays (stored as F32/F16, numpy order), `(TYPE, array)`
    pairs that are quantized to TYPE, `RawTensor`s, or tensors of another file (copied as they are).
    """
    raws = {name: _raw(name, t) for name, t in (tensors or {}).items()}
    infos = [TensorInfo(name, raw.type, tuple(raw.shape)) for name, raw in raws.items()]

    def fill(out: TensorWriter) -> None:
        for raw in raws.values():
            out.write(np.ascontiguousarray(raw.data))

    return write_streamed(path, metadata, infos, fill, alignment=alignment, version=version)


def write_streamed(
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    tensors: Sequence[TensorInfo],
    fill: Callable[[TensorWriter], None],
    *,
    alignment: int | None = None,
    version: int = 3,
) -> Path:
    """Write a GGUF file whose tensor table is known before its data: the header first, then
    `fill(out)` writes the tensors' bytes in table order through `out.write`, in pieces of any
    size. Metadata as for `write`. On any error, or KeyboardInterrupt, nothing is left at
    `path` (an existing file there stays as it was)."""
    path = Path(path)
    if alignment is None:
        alignment = int(_plain(metadata.get("general.alignment", DEFAULT_ALIGNMENT)))
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    meta = dict(metadata)
    if alignment != DEFAULT_ALIGNMENT:
        meta.setdefault("general.alignment", Typed(alignment, ValueType.UINT32))

    header = bytearray()
    header += MAGIC
    header += struct.pack("<IQQ", version, len(tensors), len(meta))
    for key, value in meta.items():
        header += _string(key)
        header += _value(value)
    offset = 0
    for info in tensors:
        header += _string(info.name)
        header += struct.pack("<I", len(info.shape))
        header += struct.pack(f"<{len(info.shape)}Q", *info.shape)
        header += struct.pack("<IQ", BY_NAME[info.type].id, offset)
        offset = _pad(offset + info.nbytes, alignment)
    header += bytes(_pad(len(header), alignment) - len(header))

    def write_all(out: BinaryIO) -> None:
        out.write(header)
        tensor_writer = TensorWriter(out, tensors, alignment)
        fill(tensor_writer)
        tensor_writer.close()

    write_atomically(path, write_all)
    return path


class TensorWriter:
    """The data section of a file being written: tensor bytes in table order, each tensor
    padded to the alignment once its last byte is in."""

    def __init__(self, out: BinaryIO, tensors: Sequence[TensorInfo], alignment: int) -> None:
        self._out = out
        self._sizes = [info.nbytes for info in tensors]
        self._names = [info.name for info in tensors]
        self._alignment = alignment
        self._index = 0  # the tensor being written
        self._written = 0  # of its bytes
        self._skip_empty()

    def write(self, data: np.ndarray | bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            if self._index == len(self._sizes):
                raise ValueError(f"{len(view)} bytes more than the tensor table holds")
            take = min(len(view), self._sizes[self._index] - self._written)
            self._out.write(view[:take])
            view = view[take:]
            self._written += take
            self._skip_empty()

    def close(self) -> None:
        if self._index != len(self._sizes):
            raise ValueError(
                f"tensor {self._names[self._index]!r} has {self._written} of its "
                f"{self._sizes[self._index]} bytes"
            )

    def _skip_empty(self) -> None:
        """Past each finished tensor (and its padding)."""
        while self._index < len(self._sizes) and self._written == self._sizes[self._index]:
            size = self._sizes[self._index]
            self._out.write(bytes(_pad(size, self._alignment) - size))
            self._index += 1
            self._written = 0


def _pad(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def _raw(name: str, tensor: TensorLike) -> RawTensor:
    if isinstance(tensor, RawTensor):
        ggml_type = BY_NAME[tensor.type]
        expected = ggml_type.nbytes(int(np.prod(tensor.shape)))
        if tensor.data.nbytes != expected:
            raise ValueError(f"{name}: {tensor.data.nbytes} bytes, {tensor.type} needs {expected}")
        return tensor
    if isinstance(tensor, Tensor):
        return RawTensor(tensor.type, tensor.shape, tensor.data)
    if isinstance(tensor, tuple):
        type_name, array = tensor
        return _quantized(name, BY_NAME[type_name], np.asarray(array, dtype=np.float32))
    array = np.asarray(tensor)
    type_name = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}.get(array.dtype)
    if type_name is None:
        raise TypeError(f"{name}: cannot store a {array.dtype} array; give (TYPE, array)")
    return RawTensor(type_name, array.shape[::-1], array.reshape(-1).view(np.uint8))


def _quantized(name: str, ggml_type: GGMLType, array: np.ndarray) -> RawTensor:
    from llamay.gguf.quant import quantize

    if array.shape[-1] % ggml_type.block_elems:
        raise ValueError(
            f"{name}: last numpy dimension {array.shape[-1]} is not a multiple of the "
            f"{ggml_type.name} block size {ggml_type.block_elems}"
        )
    return RawTensor(ggml_type.name, array.shape[::-1], quantize(array.reshape(-1), ggml_type))


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Typed) else value


def _value(value: Any) -> bytes:
    vtype, payload = _typed(value)
    return struct.pack("<I", vtype) + payload


def _typed(value: Any) -> tuple[ValueType, bytes]:
    """The GGUF type and encoded bytes of a metadata value."""
    if isinstance(value, Typed):
        if isinstance(value.value, (list, tuple, np.ndarray)):
            return ValueType.ARRAY, _array(list(value.value), value.type)
        return value.type, _scalar(value.value, value.type)
    if isinstance(value, (bool, np.bool_)):
        return ValueType.BOOL, _scalar(value, ValueType.BOOL)
    if isinstance(value, np.generic):
        vtype = _NUMPY_TO_VALUE[value.dtype.newbyteorder("<")]
        return vtype, _scalar(value, vtype)
    if isinstance(value, int):
        return _int_type(value), _scalar(value, _int_type(value))
    if isinstance(value, float):
        return ValueType.FLOAT32, _scalar(value, ValueType.FLOAT32)
    if isinstance(value, str):
        return ValueType.STRING, _string(value)
    if isinstance(value, np.ndarray):
        vtype = _NUMPY_TO_VALUE[value.dtype.newbyteorder("<")]
        data = value.astype(SCALAR_DTYPES[vtype]).tobytes()
        return ValueType.ARRAY, struct.pack("<IQ", vtype, value.size) + data
    if isinstance(value, StringArray):  # a string array even when empty
        return ValueType.ARRAY, _array(list(value), ValueType.STRING)
    if isinstance(value, (list, tuple)):
        return ValueType.ARRAY, _array(list(value), None)
    raise TypeError(f"cannot store metadata value {value!r} of type {type(value).__name__}")


_INT_WIDTH = [ValueType.INT32, ValueType.INT64, ValueType.UINT64]


def _int_type(value: int) -> ValueType:
    """The narrowest of INT32, INT64 and UINT64 that holds value."""
    if -(1 << 31) <= value < 1 << 31:
        return ValueType.INT32
    if -(1 << 63) <= value < 1 << 63:
        return ValueType.INT64
    if 0 <= value < 1 << 64:
        return ValueType.UINT64
    raise OverflowError(f"integer {value} does not fit in 64 bits")


def _array(items: list[Any], item_type: ValueType | None) -> bytes:
    if item_type is None:
        item_type = _typed(items[0])[0] if items else ValueType.INT32
        if item_type in (ValueType.INT32, ValueType.INT64, ValueType.UINT64):
            item_type = max((_int_type(v) for v in items), key=_INT_WIDTH.index, default=item_type)
    parts = [struct.pack("<IQ", item_type, len(items))]
    for item in items:
        if item_type is ValueType.STRING:
            parts.append(_string(item))
        elif item_type is ValueType.ARRAY:
            parts.append(_typed(item)[1])
        else:
            parts.append(_scalar(item, item_type))
    return b"".join(parts)


def _scalar(value: Any, vtype: ValueType) -> bytes:
    if vtype is ValueType.STRING:
        return _string(value)
    return np.asarray(value, dtype=SCALAR_DTYPES[vtype]).tobytes()
