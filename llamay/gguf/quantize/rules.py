"""Which ggml type each tensor gets: llama.cpp's rules (llama-quant.cpp's
llama_tensor_get_type) for the file types llamay writes, so that a file quantized here has
the tensor types llama-quantize gives the same input.

The rules depend on a tensor's name (its role: attn_v, ffn_down, output...), its shape (row
length, experts), its place among the tensors of its role (llama-quantize counts them in file
order: the caller passes tensors in that order) and a few facts about the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from llamay.errors import UnsupportedQuantization
from llamay.gguf.quantize.file_types import FileType
from llamay.gguf.types import BY_NAME

_RWKV_PARTS = ("first", "w0", "w1", "w2", "v0", "v1", "v2", "a0", "a1", "a2", "g1", "g2",
               "decay_w1", "decay_w2", "lerp_fused")  # fmt: skip
# Not quantized, by a name they contain (llama.cpp's tensor_allows_quantization): routers,
# tiny per-layer tables, convolution and relative-position weights, multimodal embeddings.
_KEPT_SUBSTRINGS = (
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    *(f"time_mix_{part}.weight" for part in _RWKV_PARTS),
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
)
_KEPT_NAMES = ("position_embd.weight", "token_types.weight")
_GLM5_NEXT_KEPT = ("hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj",
                   "indexer_compressor_gate", "indexer_compressor_ape", "ssm_f_a.weight",
                   "ssm_f_b.weight", "ssm_g_a.weight", "ssm_g_b.weight", "ssm_beta.weight",
                   "attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight")  # fmt: skip

# sscanf("blk.%d."): leading whitespace and a sign are accepted before the digits
_LAYER = re.compile(r"blk\.[ \t\n\v\f\r]*([+-]?\d+)")


class Role(Enum):
    TOKEN_EMBD = "token_embd"
    ATTENTION_Q = "attn_q"
    ATTENTION_V = "attn_v"
    ATTENTION_K = "attn_k"
    ATTENTION_QKV = "attn_qkv"
    ATTENTION_KV_B = "attn_kv_b"
    ATTENTION_OUTPUT = "attn_output"
    FFN_UP = "ffn_up"
    FFN_GATE = "ffn_gate"
    FFN_DOWN = "ffn_down"
    OUTPUT = "output"
    OTHER = "other"


# The value-like roles, which more bits help most.
_ATTN_V = (Role.ATTENTION_V, Role.ATTENTION_QKV, Role.ATTENTION_KV_B)


def role_of(name: str) -> Role:
    """A tensor's role by its name, the first of llama.cpp's tests that matches."""
    if name == "output.weight":
        return Role.OUTPUT
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return Role.TOKEN_EMBD
    for part, role in (
        ("attn_qkv.weight", Role.ATTENTION_QKV),
        ("attn_kv_b.weight", Role.ATTENTION_KV_B),
        ("attn_v.weight", Role.ATTENTION_V),
        ("attn_k.weight", Role.ATTENTION_K),
        ("attn_q.weight", Role.ATTENTION_Q),
        ("attn_output.weight", Role.ATTENTION_OUTPUT),
        ("ffn_up", Role.FFN_UP),
        ("ffn_gate", Role.FFN_GATE),
        ("ffn_down", Role.FFN_DOWN),
    ):
        if part in name:
            return role
    return Role.OTHER


def layer_of(name: str) -> int | None:
    """The block number of `blk.N.` names, None for others."""
    match = _LAYER.match(name)
    return int(match.group(1)) if match else None


def dims(shape: Sequence[int]) -> int:
    """ggml_n_dims: the dimensions up to the last one longer than 1 (at least one)."""
    n = len(shape)
    while n > 1 and shape[n - 1] == 1:
        n -= 1
    return n


@dataclass(frozen=True)
class ModelFacts:
    """What the rules ask of the model beyond its tensors."""

    arch: str
    n_layer: int  # {arch}.block_count
    n_gqa: int  # query heads per KV head in the first layer (0 without KV heads)
    n_expert: int
    is_70b: bool  # the 70B shape llama.cpp gives attn_v more bits in

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> ModelFacts:
        arch = metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise UnsupportedQuantization(
                "no general.architecture: not a model file llama-quantize would quantize"
            )
        n_layer = _integer(metadata.get(f"{arch}.block_count"))
        if n_layer is None or n_layer <= 0:
            raise UnsupportedQuantization(
                f"no {arch}.block_count: not a model file llama-quantize would quantize"
            )
        n_head = _first(metadata.get(f"{arch}.attention.head_count"), 0)
        n_head_kv = _first(metadata.get(f"{arch}.attention.head_count_kv"), n_head)
        n_expert = _integer(metadata.get(f"{arch}.expert_count")) or 0
        n_nextn = _integer(metadata.get(f"{arch}.nextn_predict_layers")) or 0
        blocks = n_layer - n_nextn  # the layers llama.cpp sizes the model by
        is_70b = {
            "llama": n_expert != 8 and blocks == 80 and n_head != n_head_kv,
            "qwen2": blocks == 80,
            "deci": blocks == 80,
            "olmo": blocks == 80,
            "jais2": blocks == 68,
        }.get(arch, False)
        n_gqa = n_head // n_head_kv if n_head_kv else 0
        return cls(arch, n_layer, n_gqa, n_expert, is_70b)


def _integer(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _first(value: Any, default: int) -> int:
    """A per-layer count (a number, or an array of one per layer): the first layer's."""
    if value is None:
        return default
    if isinstance(value, int):
        return value
    try:
        return int(value[0])
    except (TypeError, IndexError, ValueError):
        return default


@dataclass(frozen=True)
class Recipe:
    """A file type and the llama-quantize options that change the types it gives."""

    file_type: FileType
    pure: bool = False  # every quantized tensor the default type (shape fallbacks aside)
    quantize_output: bool = True  # False: --leave-output-tensor
    output_type: str | None = None  # --output-tensor-type
    token_embedding_type: str | None = None  # --token-embedding-type
    has_imatrix: bool = False


@dataclass(frozen=True)
class TensorShape:
    name: str
    shape: tuple[int, ...]  # GGUF order: ne[0] (row length) first
    type: str


def allows_quantization(t: TensorShape, arch: str, quantize_output: bool = True) -> bool:
    """Whether a tensor may change type at all: 2-D and 3-D weights, save the ones listed."""
    if dims(t.shape) < 2:
        return False
    name = t.name
    # llama.cpp asks rfind("weight") == size - 6, which a five-letter name also passes
    if not (name.endswith("weight") or len(name) == 5):
        return False
    if not quantize_output and name == "output.weight":
        return False
    if name in _KEPT_NAMES or any(part in name for part in _KEPT_SUBSTRINGS):
        return False
    return not (arch == "glm5-next" and any(part in name for part in _GLM5_NEXT_KEPT))


def requires_imatrix(name: str, target: str, file_type: FileType) -> bool:
    """Q2_K tensors of a Q2_K_S file are only written with an importance matrix."""
    if role_of(name) in (Role.TOKEN_EMBD, Role.OUTPUT):
        return False
    return target == "Q2_K" and file_type.name == "Q2_K_S"


def choose_types(tensors: Sequence[TensorShape], facts: ModelFacts, recipe: Recipe) -> list[str]:
    """The ggml type of each tensor (in the order given, which must be the file order), or its
    own type where it stays as it is."""
    return _Chooser(tensors, facts, recipe).types()


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    # the first and last eighths, and every third layer between
    return (
        i_layer < n_layers // 8
        or i_layer >= 7 * n_layers // 8
        or (i_layer - n_layers // 8) % 3 == 2
    )


def _block(type_name: str) -> int:
    return BY_NAME[type_name].block_elems


def _is_quantized(type_name: str) -> bool:
    return type_name not in ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")


# Where a K-quant's 256-element blocks do not fit a row, llama.cpp falls back to these.
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


class _Chooser:
    def __init__(self, tensors: Sequence[TensorShape], facts: ModelFacts, recipe: Recipe):
        self.tensors = tensors
        self.facts = facts
        self.recipe = recipe
        self.ftype = recipe.file_type.name
        roles = [role_of(t.name) for t in tensors]
        self.roles = roles
        self.n_attention_wv = sum(role in _ATTN_V for role in roles)
        self.tied = Role.OUTPUT not in roles  # the embeddings double as the output matrix
        self.n_ffn = facts.n_layer
        self.i_attention_wv = self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0

    def types(self) -> list[str]:
        return [self.choose(t, role) for t, role in zip(self.tensors, self.roles, strict=True)]

    def choose(self, t: TensorShape, role: Role) -> str:
        recipe = self.recipe
        if not allows_quantization(t, self.facts.arch, recipe.quantize_output):
            return t.type
        if recipe.token_embedding_type is not None and role is Role.TOKEN_EMBD:
            return recipe.token_embedding_type
        if recipe.output_type is not None and role is Role.OUTPUT:
            return recipe.output_type
        new_type = recipe.file_type.default
        if not _is_quantized(new_type):
            return new_type
        if not recipe.pure:
            new_type = self.mix(t, role, new_type)
        return self.fallback(t, new_type)

    def fallback(self, t: TensorShape, new_type: str) -> str:
        ncols = t.shape[0]
        if ncols % _block(new_type) == 0:
            return new_type
        if new_type in _FALLBACK:
            fallback = _FALLBACK[new_type]
        elif _block(new_type) <= 32:
            fallback = new_type
        else:
            raise UnsupportedQuantization(f"{t.name}: no type to fall back on from {new_type}")
        # rows not even a multiple of 32: F16, as llama.cpp does
        return fallback if ncols % _block(fallback) == 0 else "F16"

    def layer(self, counter: int, name: str) -> tuple[int, int]:
        """(layer, layers) for the per-layer rules: the count of the role's tensors so far,
        or, in a mixture of experts, the layer its name gives."""
        n_layer = self.n_ffn
        if max(1, self.facts.n_expert) > 1:
            i_layer = layer_of(name)
            if i_layer is None:
                raise UnsupportedQuantization(f"cannot tell the layer of tensor {name}")
            if not 0 <= i_layer < n_layer:
                raise UnsupportedQuantization(
                    f"tensor {name}: layer {i_layer} is not in [0, {n_layer})"
                )
            return i_layer, n_layer
        return counter, n_layer

    def mix(self, t: TensorShape, role: Role, new_type: str) -> str:
        facts, ftype, name = self.facts, self.ftype, t.name
        arch = facts.arch
        if arch == "glm5-next" and any(
            p in name for p in ("attn_q_a", "attn_q_b", "nextn.eh_proj")
        ):
            return "Q8_0"  # the default type is quantized here
        if role is Role.OUTPUT or (self.tied and role is Role.TOKEN_EMBD):
            if self.recipe.output_type is not None:
                return self.recipe.output_type
            if ftype == "MXFP4_MOE" or arch == "falcon" or t.shape[0] % _block(new_type):
                return "Q8_0"
            return new_type if new_type == "Q8_0" else "Q6_K"
        if ftype == "MXFP4_MOE":
            experts = len(t.shape) > 2 and t.shape[2] > 1
            feed_forward = role in (Role.FFN_UP, Role.FFN_GATE, Role.FFN_DOWN)
            return "MXFP4" if experts and (arch != "bailingmoe3" or feed_forward) else "Q8_0"
        if role is Role.TOKEN_EMBD:
            return new_type
        if role in _ATTN_V:
            new_type = self.attn_v(new_type)
            self.i_attention_wv += 1
            return new_type
        if role is Role.ATTENTION_K:
            return "Q8_0" if facts.n_expert == 8 else new_type
        if role is Role.FFN_DOWN:
            i_layer, n_layer = self.layer(self.i_ffn_down, name)
            new_type = self.ffn_down(new_type, i_layer, n_layer)
            self.i_ffn_down += 1
            return new_type
        if role is Role.ATTENTION_OUTPUT:
            return self.attn_output(new_type)
        if role is Role.FFN_GATE:
            self.layer(self.i_ffn_gate, name)  # checks the layer, as llama.cpp does
            self.i_ffn_gate += 1
        elif role is Role.FFN_UP:
            self.layer(self.i_ffn_up, name)
            self.i_ffn_up += 1
        return new_type

    def attn_v(self, new_type: str) -> str:
        """attn_v's type, and attn_qkv's and attn_kv_b's: llama.cpp gives the fused and
        compressed projections attn_v's rules (its own rules for attn_qkv come after them,
        and are never reached)."""
        ftype, facts, i, n = self.ftype, self.facts, self.i_attention_wv, self.n_attention_wv
        if ftype == "Q2_K":
            new_type = "Q4_K" if facts.n_gqa >= 4 else "Q3_K"
        elif ftype == "Q2_K_S" and facts.n_gqa >= 4:
            new_type = "Q4_K"
        elif ftype == "Q3_K_M":
            new_type = "Q5_K" if i < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            new_type = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, n):
            new_type = "Q6_K"
        elif ftype == "Q4_K_S" and i < 4:
            new_type = "Q5_K"
        if facts.is_70b and new_type in ("Q3_K", "Q4_K"):
            # eight query heads share each attn_v: more bits cost little there
            new_type = "Q5_K"
        if facts.n_expert == 8:
            new_type = "Q8_0"
        return new_type

    def ffn_down(self, new_type: str, i_layer: int, n_layer: int) -> str:
        ftype, falcon = self.ftype, self.facts.arch == "falcon"
        if ftype == "Q2_K":
            return "Q3_K"
        if ftype == "Q2_K_S":
            return "Q4_K" if i_layer < n_layer // 8 else new_type
        if ftype == "Q3_K_M":
            if i_layer < n_layer // 16:
                return "Q5_K"
            return "Q4_K" if not falcon or _use_more_bits(i_layer, n_layer) else "Q3_K"
        if ftype == "Q3_K_L":
            return "Q4_K" if falcon else "Q5_K"
        if ftype == "Q4_K_M":
            if falcon:
                if i_layer < n_layer // 16:
                    return "Q6_K"
                return "Q5_K" if _use_more_bits(i_layer, n_layer) else "Q4_K"
            return "Q6_K" if _use_more_bits(i_layer, n_layer) else new_type
        if ftype == "Q5_K_M" and _use_more_bits(i_layer, n_layer):
            return "Q6_K"
        if ftype == "Q4_K_S" and not falcon and i_layer < n_layer // 8:
            return "Q5_K"
        if ftype in ("Q4_0", "Q5_0") and self.recipe.has_imatrix and i_layer < n_layer // 8:
            # the first layers' ffn_down go astray even with an importance matrix
            return "Q4_1" if ftype == "Q4_0" else "Q5_1"
        return new_type

    def attn_output(self, new_type: str) -> str:
        ftype = self.ftype
        if self.facts.arch == "falcon":
            return "Q4_K" if ftype == "Q3_K_L" else new_type
        if self.facts.n_expert == 8:
            mixes = ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M")
            return "Q5_K" if ftype in mixes else new_type
        return {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K"}.get(ftype, new_type)
