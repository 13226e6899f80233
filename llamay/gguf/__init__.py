"""GGUF files: read (mmap, zero-copy tensor views, validation), write, and the ggml type table."""

from llamay.gguf.format import ValueType
from llamay.gguf.reader import GGUFFile, Tensor, read
from llamay.gguf.types import BY_ID, BY_NAME, GGMLType
from llamay.gguf.writer import RawTensor, Typed, write

__all__ = [
    "BY_ID",
    "BY_NAME",
    "GGMLType",
    "GGUFFile",
    "RawTensor",
    "Tensor",
    "Typed",
    "ValueType",
    "read",
    "write",
]
