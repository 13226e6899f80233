"""GGUF constants shared by the reader and the writer: magic, versions, metadata value types."""

from __future__ import annotations

import enum

import numpy as np

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 used 32-bit counts and has not been written since 2023
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # ggml tensors have at most four dimensions


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# Little-endian numpy dtypes of the fixed-size value types.
SCALAR_DTYPES: dict[ValueType, np.dtype] = {
    ValueType.UINT8: np.dtype("<u1"),
    ValueType.INT8: np.dtype("<i1"),
    ValueType.UINT16: np.dtype("<u2"),
    ValueType.INT16: np.dtype("<i2"),
    ValueType.UINT32: np.dtype("<u4"),
    ValueType.INT32: np.dtype("<i4"),
    ValueType.FLOAT32: np.dtype("<f4"),
    ValueType.BOOL: np.dtype("<u1"),
    ValueType.UINT64: np.dtype("<u8"),
    ValueType.INT64: np.dtype("<i8"),
    ValueType.FLOAT64: np.dtype("<f8"),
}
