"""GGUF files: read (mmap, zero-copy tensor views, validation), write, and the ggml type table."""

from llamay.gguf.format import ValueType
from llamay.gguf.reader import GGUFFile, Tensor, plain_value, read
from llamay.gguf.strings import StringArray
from llamay.gguf.types import BY_ID, BY_NAME, GGMLType
from llamay.gguf.writer import RawTensor, TensorInfo, Typed, write, write_streamed

__all__ = [
    "BY_ID",
    "BY_NAME",
    "GGMLType",
    "GGUFFile",
    "RawTensor",
    "StringArray",
    "Tensor",
    "TensorInfo",
    "Typed",
    "ValueType",
    "plain_value",
    "read",
    "write",
    "write_streamed",
]
