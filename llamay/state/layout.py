"""The shape of a model's KV pages, the operations every backend's page storage offers, and
what a snapshot names as the model it belongs to.

A page holds the K and V rows of `page_tokens` consecutive positions for every layer and KV
head. However a backend keeps its pages (CPU memory, a GPU buffer, NumPy arrays), a page read
or written through its `PageStorage` is these canonical bytes, little-endian:

    layer -> {K, V} -> kv_head -> token -> row of head_dim elements of `dtype`

a row being head_dim F16 or F32 values, or head_dim / 32 of ggml's Q8_0 blocks (a binary16
scale, then 32 int8 values; 34 bytes), so page_bytes = n_layers * 2 * n_kv_heads * page_tokens *
row bytes. Snapshots
hold pages in this form, so a snapshot restores on any machine and any backend of the same
determinism class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from llamay._core import pages
from llamay._core.pages import kv_row_bytes

# F16 is llama.cpp's default (half the memory of F32); Q8_0 takes 17/32 of F16's bytes
KV_TYPES = tuple(pages.KV_TYPES)
# a floating-point type's element in canonical (little-endian) page bytes
FLOAT_KV_ELEMENTS = {name: e.newbyteorder("<") for name, e in pages.FLOAT_KV_ELEMENTS.items()}
_Q8_0 = np.dtype([("d", "<f2"), ("q", "i1", (32,))])
# the attention kernels visit positions in tiles of one page
PAGE_TOKENS = (16, 32, 64)
# far above any real model, and low enough that no stride can overflow 64 bits
MAX_DIM = 1 << 16


@dataclass(frozen=True)
class KVLayout:
    """The page shape of one model's KV cache."""

    n_layers: int
    n_kv_heads: int
    head_dim: int
    page_tokens: int = 32
    dtype: str = "F16"

    def __post_init__(self) -> None:
        dims = (self.n_layers, self.n_kv_heads, self.head_dim)
        if not all(isinstance(n, int) and 1 <= n <= MAX_DIM for n in dims):
            raise ValueError(
                f"n_layers, n_kv_heads and head_dim must be between 1 and {MAX_DIM}, not "
                f"{self.n_layers}, {self.n_kv_heads} and {self.head_dim}"
            )
        if self.page_tokens not in PAGE_TOKENS:
            raise ValueError(f"page_tokens must be one of {PAGE_TOKENS}, not {self.page_tokens}")
        if self.dtype not in KV_TYPES:
            raise ValueError(
                f"the KV type must be one of {', '.join(KV_TYPES)}, not {self.dtype!r}"
            )
        kv_row_bytes(self.dtype, self.head_dim)  # refuses a head size the type cannot hold

    @property
    def row_bytes(self) -> int:
        return kv_row_bytes(self.dtype, self.head_dim)

    @property
    def page_bytes(self) -> int:
        return self.n_layers * 2 * self.n_kv_heads * self.page_tokens * self.row_bytes

    def n_pages_for(self, budget_bytes: int) -> int:
        """The pages a budget of bytes holds; ValueError when not even one."""
        n_pages = budget_bytes // self.page_bytes
        if n_pages < 1:
            raise ValueError(
                f"a KV budget of {budget_bytes} bytes holds no page: one page of "
                f"{self.page_tokens} tokens takes {self.page_bytes} bytes for this model; "
                "raise the budget"
            )
        return n_pages

    def values(self, raw: bytes | memoryview) -> np.ndarray:
        """The K and V values in canonical bytes of whole pages, as floats: an array of
        (pages * n_layers * 2 * n_kv_heads, page_tokens, head_dim) (Q8_0 dequantized to F32)."""
        shape = (-1, self.page_tokens, self.head_dim)
        if self.dtype in FLOAT_KV_ELEMENTS:
            return np.frombuffer(raw, dtype=FLOAT_KV_ELEMENTS[self.dtype]).reshape(shape)
        blocks = np.frombuffer(raw, dtype=_Q8_0)
        values = blocks["q"].astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
        return values.reshape(shape)

    def finite(self, raw: bytes | memoryview) -> bool:
        """Whether every K and V value in canonical page bytes is finite."""
        if self.dtype in FLOAT_KV_ELEMENTS:
            return bool(np.isfinite(np.frombuffer(raw, dtype=FLOAT_KV_ELEMENTS[self.dtype])).all())
        return bool(np.isfinite(np.frombuffer(raw, dtype=_Q8_0)["d"]).all())

    def positions(self, raw: bytes | memoryview, n: int) -> np.ndarray:
        """The K and V of a page's first n positions, from its canonical bytes: an array of
        (n_layers * 2 * n_kv_heads, n, head_dim) values."""
        return self.values(raw)[:, :n]

    def describe(self) -> dict[str, Any]:
        """The layout as a snapshot records it."""
        return {
            "kv_dtype": self.dtype,
            "page_tokens": self.page_tokens,
            "n_layers": self.n_layers,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "page_bytes": self.page_bytes,
        }


class PageStorage(Protocol):
    """Where a backend keeps the pages of one KV cache. Page ids are 0 .. n_pages-1; which
    ones are in use is the state engine's bookkeeping, not the storage's."""

    def taking(self, pages: np.ndarray) -> None:
        """Advice: the state engine has taken these pages, to be written (the CPU backend moves
        memory that fills up onto huge pages). No page's bytes change."""

    def copy(self, src: int, dst: int) -> None:
        """Copies page src over page dst (copy-on-write)."""

    def zero(self, page: int) -> None:
        """Sets every byte of a page to zero."""

    def read(self, page: int) -> bytes:
        """A page's canonical bytes (the module docstring)."""

    def write(self, page: int, raw: bytes | memoryview) -> None:
        """Overwrites a page with canonical bytes."""


@dataclass(frozen=True)
class ModelIdentity:
    """What a snapshot records of the model that wrote it, and checks when it is restored:
    the weights (a fingerprint of the file), the backend and kernel set that computed the KV,
    and the backend's determinism class (backends of one class compute the same bits)."""

    fingerprint: str
    name: str
    n_vocab: int
    n_ctx: int
    backend: str
    determinism: str
    kernels: str


_UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]+)\s*")


def parse_size(text: str) -> int:
    """Bytes in a size such as "2GiB", "512 MB" or "1.5GiB" (units are case-insensitive;
    KB/MB/GB are powers of 1000, KiB/MiB/GiB powers of 1024; fractions of a byte round down)."""
    match = _SIZE.fullmatch(text)
    if not match or match[2].upper() not in _UNITS:
        raise ValueError(
            f"cannot read {text!r} as a size: write a number and a unit, such as 2GiB or "
            "512MB (units: B, KB, MB, GB, KiB, MiB, GiB)"
        )
    return int(Fraction(match[1]) * _UNITS[match[2].upper()])
