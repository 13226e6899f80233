"""A GGUF array of strings, kept as the file stores it: the UTF-8 bytes back to back.

A vocabulary is 128k-260k strings and its BPE merges as many again. As Python lists they cost
tens of MB (an object each, plus the holes their freeing leaves in the allocator's pools) and
most of a model's load time; here they are one bytes object and one offsets array, and a string
is decoded when it is read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np


class StringArray(Sequence[str]):
    """Strings i = blob[offsets[i]:offsets[i + 1]], decoded as UTF-8 (a file's: checked when
    read; surrogates pass, as the tokenizers let them)."""

    __slots__ = ("blob", "offsets")

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob = blob
        self.offsets = offsets  # int64, len + 1 of them, from 0 to len(blob)
        offsets.flags.writeable = False  # tables built on the array keep pointing into it

    @classmethod
    def of(cls, strings: Iterable[str]) -> StringArray:
        """The array of Python strings."""
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return cls(b"".join(encoded), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.encoded(index).decode("utf-8", "surrogatepass")

    def encoded(self, index: int) -> bytes:
        """String `index`'s UTF-8 bytes."""
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"string {index} of an array of {n}")
        index %= n
        return self.blob[self.offsets[index] : self.offsets[index + 1]]

    def encoded_lengths(self) -> np.ndarray:
        """Each string's length in UTF-8 bytes."""
        return np.diff(self.offsets)

    def __iter__(self) -> Iterator[str]:
        blob = self.blob
        for begin, end in itertools.pairwise(self.offsets.tolist()):
            yield blob[begin:end].decode("utf-8", "surrogatepass")

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and any(s == value for s in self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringArray):
            return self.blob == other.blob and np.array_equal(self.offsets, other.offsets)
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"StringArray({len(self)} strings)"
