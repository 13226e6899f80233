"""The ggml tensor type table: id, name, block size (elements) and block bytes.

The table itself is C's (llamay/_core/csrc/ggml_types.h, read through
llamay._core.quants.type_table): the kernels and the file reader list the same types by
construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from llamay._core.quants import type_table


@dataclass(frozen=True)
class GGMLType:
    id: int
    name: str
    block_elems: int
    block_bytes: int

    def nbytes(self, n_elements: int) -> int:
        """Bytes taken by n_elements (a multiple of the block size)."""
        return n_elements // self.block_elems * self.block_bytes


_ROWS = type_table()
_TABLE = [GGMLType(id, name, elems, nbytes) for id, name, elems, nbytes, _ in _ROWS]

BY_ID: dict[int, GGMLType] = {t.id: t for t in _TABLE}
BY_NAME: dict[str, GGMLType] = {t.name: t for t in _TABLE}

# Elements per K-quant super-block.
QK_K = BY_NAME["Q2_K"].block_elems

# Types llamay knows but declines: their kernels are not implemented, by decision (see docs/gguf.md).
REFUSED = {name for _, name, _, _, refused in _ROWS if refused}


def by_name(name: str) -> GGMLType:
    try:
        return BY_NAME[name.upper()]
    except KeyError:
        raise KeyError(f"unknown ggml type {name!r}; known: {', '.join(BY_NAME)}") from None
