"""The file types (`general.file_type`, llama.cpp's llama_ftype) `llamay quantize` writes, and
the ones it declines by name.

A file type is a recipe, not one tensor type: Q4_K_M is mostly Q4_K, with some tensors given
Q6_K (rules.py says which). Its `default` is the tensor type the recipe starts from.
"""

from __future__ import annotations

from dataclasses import dataclass

from llamay.errors import UnsupportedQuantization


@dataclass(frozen=True)
class FileType:
    name: str  # as llama-quantize spells it
    id: int  # llama_ftype, stored as general.file_type
    default: str  # the ggml type the recipe starts from


_TYPES = [
    FileType("F32", 0, "F32"),
    FileType("F16", 1, "F16"),
    FileType("Q4_0", 2, "Q4_0"),
    FileType("Q4_1", 3, "Q4_1"),
    FileType("Q8_0", 7, "Q8_0"),
    FileType("Q5_0", 8, "Q5_0"),
    FileType("Q5_1", 9, "Q5_1"),
    FileType("Q2_K", 10, "Q2_K"),
    FileType("Q3_K_S", 11, "Q3_K"),
    FileType("Q3_K_M", 12, "Q3_K"),
    FileType("Q3_K_L", 13, "Q3_K"),
    FileType("Q4_K_S", 14, "Q4_K"),
    FileType("Q4_K_M", 15, "Q4_K"),
    FileType("Q5_K_S", 16, "Q5_K"),
    FileType("Q5_K_M", 17, "Q5_K"),
    FileType("Q6_K", 18, "Q6_K"),
    FileType("Q2_K_S", 21, "Q2_K"),  # needs an importance matrix
    FileType("BF16", 32, "BF16"),
    FileType("MXFP4_MOE", 38, "MXFP4"),
]
FILE_TYPES: dict[str, FileType] = {t.name: t for t in _TYPES}

# llama-quantize's shorthand names
ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}

# What llama-quantize offers and llamay declines: the i-quants and the ternary and 1-2 bit
# types, whose searches over lattices llamay does not implement (it reads all but IQ1 files).
DECLINED = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S",
            "IQ3_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "Q1_0", "Q2_0", "NVFP4", "COPY")  # fmt: skip


def file_type(name: str) -> FileType:
    """The file type named `name` (any case, llama-quantize's aliases too); one-line errors
    for the ones llamay declines and for unknown names."""
    key = name.strip().upper()
    key = ALIASES.get(key, key)
    if key in FILE_TYPES:
        return FILE_TYPES[key]
    offered = ", ".join(FILE_TYPES)
    if key in DECLINED:
        raise UnsupportedQuantization(
            f"llamay does not write {key} files: the i-quants and the ternary and 1-2 bit "
            f"types are llama-quantize's alone; llamay writes {offered}"
        )
    raise UnsupportedQuantization(f"unknown quantization type {name!r}; llamay writes {offered}")
