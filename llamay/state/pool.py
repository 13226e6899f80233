"""The page pool: the physical KV pages of one model.

The pool owns the arena (pages, refcounts, the free list) and nothing else. Contexts and the
prefix tree own lists of page ids and move refcounts through `pool.arena`
(alloc/alloc_many/incref/decref/copy_page); they never see memory they did not allocate.

Invariants, after every call: pages_used + pages_free == pages_total; a page is free exactly
when its refcount is 0; a free page holds zeros.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import numpy as np

from llamay._core.pages import PageArena, page_nbytes

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


class PagePool:
    """The KV pages of one model, sized by a memory budget in bytes or a number of pages."""

    def __init__(
        self,
        n_layers: int,
        n_kv_heads: int,
        head_dim: int,
        *,
        page_tokens: int = 32,
        dtype: str = "F16",  # llama.cpp's default KV type: half the memory of F32
        budget_bytes: int | None = None,
        n_pages: int | None = None,
    ) -> None:
        if (budget_bytes is None) == (n_pages is None):
            raise ValueError("size the KV pool by budget_bytes or by n_pages (exactly one)")
        if budget_bytes is not None:
            page_bytes = page_nbytes(n_layers, n_kv_heads, head_dim, page_tokens, dtype)
            n_pages = budget_bytes // page_bytes
            if n_pages < 1:
                raise ValueError(
                    f"a KV budget of {budget_bytes} bytes holds no page: one page of "
                    f"{page_tokens} tokens takes {page_bytes} bytes for this model; "
                    "raise the budget"
                )
        self.arena = PageArena(n_layers, n_kv_heads, head_dim, page_tokens, dtype, n_pages)

    @property
    def bytes_per_page(self) -> int:
        return self.arena.page_bytes

    def stats(self) -> dict[str, Any]:
        """Page accounting, as kv_stats() reports it."""
        arena = self.arena
        return {
            "page_tokens": arena.page_tokens,
            "pages_total": arena.n_pages,
            "pages_used": arena.n_used,
            "pages_free": arena.n_free,
            "bytes_per_page": self.bytes_per_page,
            "dtype": arena.dtype,
        }

    def read_page(self, page: int) -> bytes:
        """A page's raw bytes, as csrc/pages.h lays them out: per layer, K then V."""
        arena = self.arena
        return b"".join(
            _little_endian(view(page, layer)).tobytes()
            for layer in range(arena.n_layers)
            for view in (arena.k_view, arena.v_view)
        )

    def write_page(self, page: int, raw: bytes | memoryview) -> None:
        """Overwrites an allocated page with raw bytes laid out as read_page returns them."""
        arena = self.arena
        if len(raw) != arena.page_bytes:
            raise ValueError(f"a page has {arena.page_bytes} bytes, not {len(raw)}")
        half = arena.page_bytes // (2 * arena.n_layers)
        at = 0
        for layer in range(arena.n_layers):
            for view in (arena.k_view, arena.v_view):
                block = view(page, layer)
                little = block.dtype.newbyteorder("<")
                block.reshape(-1)[:] = np.frombuffer(raw, little, half // block.itemsize, at)
                at += half


def _little_endian(block: np.ndarray) -> np.ndarray:
    return block.astype(block.dtype.newbyteorder("<"), copy=False)
