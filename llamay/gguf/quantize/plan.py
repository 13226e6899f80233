"""What a quantization will write, decided before a byte is: the output's tensor table (in
llama.cpp's order, with each tensor's type), its metadata, and every refusal llama-quantize
would make (requantizing, a missing or mismatched importance matrix, types that cannot fit).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llamay.errors import UnsupportedQuantization
from llamay.gguf.format import ValueType
from llamay.gguf.quantize.file_types import FileType, file_type
from llamay.gguf.quantize.imatrix import ImportanceMatrix
from llamay.gguf.quantize.rules import (
    ModelFacts,
    Recipe,
    Role,
    TensorShape,
    allows_quantization,
    choose_types,
    dims,
    layer_of,
    requires_imatrix,
    role_of,
)
from llamay.gguf.reader import GGUFFile, Tensor
from llamay.gguf.types import BY_NAME
from llamay.gguf.writer import TensorInfo, Typed

# The types llamay writes tensors in (--output-tensor-type and --token-embedding-type too).
WRITABLE = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
            "Q5_K", "Q6_K", "MXFP4")  # fmt: skip
# Source types a tensor can be converted from without being quantized already.
_PLAIN = ("F32", "F16", "BF16")
# Keys llama-quantize sets (and drops: a quantized file is written whole, never split).
QUANTIZATION_VERSION = 2  # ggml's GGML_QNT_VERSION
_SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")
# What llama-quantize records of an importance matrix (its quantize.cpp), values cut at 127
# bytes as it cuts them.
IMATRIX_FILE_KEY = "quantize.imatrix.file"
IMATRIX_DATASET_KEY = "quantize.imatrix.dataset"
IMATRIX_ENTRIES_KEY = "quantize.imatrix.entries_count"
IMATRIX_CHUNKS_KEY = "quantize.imatrix.chunks_count"


@dataclass(frozen=True)
class QuantizeOptions:
    """llama-quantize's options, by their meaning."""

    file_type: str  # Q4_K_M, Q8_0, ... (file_types.py)
    imatrix: str | os.PathLike[str] | None = None  # the importance matrix file, as named
    pure: bool = False
    leave_output_tensor: bool = False
    output_tensor_type: str | None = None
    token_embedding_type: str | None = None
    allow_requantize: bool = False


@dataclass(frozen=True)
class Step:
    """One tensor of the output: where it comes from and what it becomes."""

    source: Tensor
    info: TensorInfo  # as written: its type, and its shape without trailing ones
    weights: np.ndarray | None  # importance, row length x experts values; None without

    @property
    def converts(self) -> bool:
        return self.info.type != self.source.type


@dataclass(frozen=True)
class Plan:
    file_type: FileType
    metadata: dict[str, Any]
    steps: list[Step]

    @property
    def source_bytes(self) -> int:
        return sum(step.source.nbytes for step in self.steps)


def file_order(names: Sequence[str]) -> list[str]:
    """The order llama.cpp's loader keeps tensors in, which its quantized files have: by layer
    (tensors outside the blocks first), then by name, byte by byte."""
    return sorted(names, key=lambda name: (_layer_or_none(name), name.encode()))


def _layer_or_none(name: str) -> int:
    layer = layer_of(name)
    return -1 if layer is None else layer


def make_plan(
    gg: GGUFFile, options: QuantizeOptions, imatrix: ImportanceMatrix | None = None
) -> Plan:
    """The plan for quantizing `gg`; UnsupportedQuantization (one line) for what cannot be."""
    ftype = file_type(options.file_type)
    output_type = _user_type(options.output_tensor_type, "--output-tensor-type")
    embedding_type = _user_type(options.token_embedding_type, "--token-embedding-type")
    facts = ModelFacts.of(gg.metadata)
    recipe = Recipe(
        ftype,
        pure=options.pure,
        quantize_output=not options.leave_output_tensor,
        output_type=output_type,
        token_embedding_type=embedding_type,
        has_imatrix=imatrix is not None,
    )
    sources = [gg.tensors[name] for name in file_order(list(gg.tensors))]
    shapes = [TensorShape(t.name, t.shape, t.type) for t in sources]
    targets = choose_types(shapes, facts, recipe)
    steps = []
    for tensor, shape, target in zip(sources, shapes, targets, strict=True):
        if imatrix is None and allows_quantization(shape, facts.arch, recipe.quantize_output):
            _check_needs_no_imatrix(tensor, target, ftype)
        _check_target(tensor, target)
        info = TensorInfo(tensor.name, target, tuple(tensor.shape[: dims(tensor.shape)]))
        weights = None
        if target != tensor.type:
            _check_source(tensor, target, options.allow_requantize)
            weights = _weights_for(tensor, target, ftype, imatrix)
        steps.append(Step(tensor, info, weights))
    metadata = output_metadata(gg, ftype, options, imatrix)
    return Plan(ftype, metadata, steps)


def _user_type(name: str | None, option: str) -> str | None:
    if name is None:
        return None
    key = name.strip().upper()
    if key not in WRITABLE:
        raise UnsupportedQuantization(
            f"{option} {name}: llamay writes tensors as {', '.join(WRITABLE)}"
        )
    return key


def _check_needs_no_imatrix(tensor: Tensor, target: str, ftype: FileType) -> None:
    if requires_imatrix(tensor.name, target, ftype):
        raise UnsupportedQuantization(
            f"{ftype.name} needs an importance matrix ({tensor.name} becomes {target}): "
            "give one with --imatrix FILE"
        )


def _check_target(tensor: Tensor, target: str) -> None:
    if target not in WRITABLE and target != tensor.type:
        raise UnsupportedQuantization(f"{tensor.name}: llamay does not write {target} tensors")
    block = BY_NAME[target].block_elems
    if tensor.shape[0] % block:  # only a type the user named can fail here
        raise UnsupportedQuantization(
            f"{tensor.name}: rows of {tensor.shape[0]} do not split into {target} blocks of {block}"
        )


def _check_source(tensor: Tensor, target: str, allow_requantize: bool) -> None:
    if tensor.type in _PLAIN:
        pass
    elif tensor.type in ("F64", "I8", "I16", "I32", "I64"):
        raise UnsupportedQuantization(f"{tensor.name}: cannot convert {tensor.type} to {target}")
    elif not allow_requantize:
        raise UnsupportedQuantization(
            f"{tensor.name} is already {tensor.type}: quantizing it again loses more than "
            "quantizing the original once; quantize the F16, BF16 or F32 file, or pass "
            "--allow-requantize"
        )
    if len(tensor.shape) > 3 and any(d != 1 for d in tensor.shape[3:]):
        raise UnsupportedQuantization(
            f"{tensor.name}: a 4-D tensor, which llama-quantize cannot convert either"
        )


def _weights_for(
    tensor: Tensor, target: str, ftype: FileType, imatrix: ImportanceMatrix | None
) -> np.ndarray | None:
    """The tensor's importance (row length x experts values), as llama.cpp picks it."""
    if imatrix is None:
        return None
    weights = imatrix.weights.get(tensor.name)
    n_per_row = tensor.shape[0]
    n_expert = tensor.shape[2] if len(tensor.shape) > 2 else 1
    if weights is not None and weights.size != n_per_row * n_expert:
        if role_of(tensor.name) is not Role.TOKEN_EMBD:  # llama.cpp lets the embeddings pass
            raise UnsupportedQuantization(
                f"the importance matrix holds {weights.size} values for {tensor.name}, which "
                f"needs {n_per_row * n_expert}: it was made for another model"
            )
        weights = None
    if weights is None and requires_imatrix(tensor.name, target, ftype):
        raise UnsupportedQuantization(
            f"the importance matrix has nothing for {tensor.name}, which {ftype.name} makes "
            f"{target}: without it the result would be garbage"
        )
    return weights


def output_metadata(
    gg: GGUFFile, ftype: FileType, options: QuantizeOptions, imatrix: ImportanceMatrix | None
) -> dict[str, Any]:
    """The input's metadata with its stored types, then llama-quantize's own keys: the file
    type and quantization version (moved to the end, as it moves them), and what it records of
    an importance matrix."""
    metadata = gg.typed_metadata()
    for key in (*_SPLIT_KEYS, "general.quantization_version", "general.file_type"):
        metadata.pop(key, None)
    metadata["general.quantization_version"] = Typed(QUANTIZATION_VERSION, ValueType.UINT32)
    metadata["general.file_type"] = Typed(ftype.id, ValueType.UINT32)
    if imatrix is not None and options.imatrix is not None:
        extra: dict[str, Any] = {IMATRIX_FILE_KEY: _cut(os.fspath(options.imatrix))}
        if imatrix.datasets:
            extra[IMATRIX_DATASET_KEY] = _cut(imatrix.datasets[0])
        extra[IMATRIX_ENTRIES_KEY] = Typed(len(imatrix.weights), ValueType.UINT32)
        if imatrix.chunk_count > 0:
            extra[IMATRIX_CHUNKS_KEY] = Typed(imatrix.chunk_count, ValueType.UINT32)
        for key, value in extra.items():
            metadata.pop(key, None)
            metadata[key] = value
    return metadata


def _cut(text: str) -> str:
    """At most 127 bytes of UTF-8 (llama.cpp's override values hold 128 with the NUL)."""
    return text.encode()[:127].decode(errors="ignore")
