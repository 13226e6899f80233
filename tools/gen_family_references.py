"""Writes tests/data/families: small synthetic models of the newer families (Granite,
OLMo 2, SmolLM3, Cohere 2, Qwen 2/3 MoE, Mixtral, Granite MoE, gpt-oss) and llama.cpp's
log-probabilities on them, teacher-forced along a text; tests/models/test_families_llama_cpp.py
holds llamay to them.

    PYTHONPATH=. python tools/gen_family_references.py [NAME ...]

It needs llama-cpp-python (the `bench` extra, `pip install '.[bench]'`); nothing else does.

For each model: the F16 file is llamay.models.synthetic.write_model's (seeded); Q8_0, Q4_K_M
(and for gpt-oss MXFP4_MOE, the type of the real gpt-oss files) are made by llama.cpp's own
quantizer (llama_model_quantize) from it, and then made again by synthetic.requantize with the
per-tensor types llama.cpp chose: the script checks that every tensor's bytes are the same.
So no model file is committed: the test writes each one again from its recorded recipe and
checks its sha256, and llama.cpp's reference was computed on exactly that file.

Each reference holds, per position, llama.cpp's top-K tokens and their log-probabilities
(float32), from one run over the whole text in one batch on 2 threads. The calibration runs
llama.cpp on the same file token by token on 1 thread, and with flash attention, and records
the KL divergence of each run from the first (on the same top-K coarsening the test uses).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import platform
import sys
from pathlib import Path

import numpy as np

from llamay import gguf
from llamay.models import synthetic

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "families"
VOCAB_FILE = ROOT / "tests" / "data" / "synth" / "llama2-spm-Q8_0.gguf"
TEXT = ROOT / "tests" / "data" / "texts" / "gpl-3.txt"
N_TOKENS = 160
TOP_K = 32
COMMON = {"n_embd": 256, "n_head": 4, "n_head_kv": 2, "head_dim": 64, "context_length": 512}

# name: (architecture, write_model options). Shapes are small (a 2,048-token vocabulary, two
# layers, four where a layer pattern needs them) and K-quant friendly where that costs little:
# every matrix whose columns are n_embd takes K-quants; the experts are 64 wide (8 of them, 2
# chosen), so their down projections get llama-quantize's fallback types, as narrow real
# experts do. Outputs are tied to the embeddings wherever the architecture allows it.
_MOE = {"n_layer": 2, "n_ff": 256, "n_ff_exp": 256, "n_expert": 8, "n_expert_used": 2}
MODELS = {
    "granite": ("granite", {"n_layer": 2, "n_ff": 512, "output": False}),
    "olmo2": ("olmo2", {"n_layer": 2, "n_ff": 512}),
    "smollm3": ("smollm3", {"n_layer": 4, "n_ff": 256, "output": False}),
    "cohere2": (
        "cohere2",
        {"n_layer": 4, "n_ff": 256, "metadata": {"cohere2.attention.sliding_window": 32}},
    ),
    "qwen3moe": ("qwen3moe", {**_MOE, "n_ff": 512, "output": False}),
    "qwen2moe": ("qwen2moe", {**_MOE, "n_ff_shexp": 256}),
    "mixtral": ("llama", _MOE),
    # narrow experts: their down projections get llama-quantize's fallback types (Q5_0, Q8_0)
    "granitemoe": ("granitemoe", {**_MOE, "n_ff": 64, "n_ff_shexp": 64, "output": False}),
    "gpt-oss": (
        "gpt-oss",
        {**_MOE, "n_expert_used": 4, "metadata": {"gpt-oss.attention.sliding_window": 32}},
    ),
}
FTYPES = synthetic.FILE_TYPES


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError:
        sys.exit("llama-cpp-python is not installed: pip install '.[bench]'")
    return llama_cpp


def vocabulary() -> dict:
    """The 2,048-token llama SentencePiece vocabulary of tests/data/synth."""
    metadata = gguf.read(VOCAB_FILE).metadata
    return {k: v for k, v in metadata.items() if k.startswith("tokenizer.")}


def tokens() -> list[int]:
    from llamay.tokenizer import read_tokenizer

    tokenizer = read_tokenizer(gguf.read(VOCAB_FILE))
    return tokenizer.tokenize(TEXT.read_text())[:N_TOKENS]


def write_f16(name: str, path: Path) -> dict:
    arch, options = MODELS[name]
    options = {**COMMON, **options}
    synthetic.write_model(path, arch, vocabulary(), weight_type="F16", seed=15, **options)
    return {"arch": arch, "seed": 15, "weight_type": "F16", **options}


def quantize(source: Path, dest: Path, ftype: str) -> None:
    llama_cpp = _llama_cpp()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = 2
    status = llama_cpp.llama_model_quantize(
        str(source).encode(), str(dest).encode(), ctypes.byref(params)
    )
    if status != 0:
        sys.exit(f"llama_model_quantize {source} -> {ftype} failed ({status})")


def same_tensors(a: Path, b: Path) -> bool:
    ta, tb = gguf.read(a).tensors, gguf.read(b).tensors
    return ta.keys() == tb.keys() and all(
        ta[n].type == tb[n].type and np.array_equal(ta[n].data, tb[n].data) for n in ta
    )


def llama_cpp_logprobs(
    path: Path, ids: list[int], threads: int, n_batch: int, flash_attn: bool = False
) -> np.ndarray:
    """llama.cpp's log-softmax rows (float64) after each of ids, fed n_batch at a time."""
    llama_cpp = _llama_cpp()
    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=512,
        n_batch=n_batch,
        n_ubatch=n_batch,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        flash_attn=flash_attn,
        verbose=False,
    )
    llm.eval(ids)
    logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
    llm.close()
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def top_k(logprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids = np.argsort(-logprobs, axis=1, kind="stable")[:, :TOP_K]
    return ids.astype(np.uint16), np.take_along_axis(logprobs, ids, axis=1).astype(np.float32)


def coarse_kl(ids: np.ndarray, ref: np.ndarray, other: np.ndarray) -> np.ndarray:
    """KL(reference || other) per position over the reference's top-K tokens and the rest
    lumped into one (the test's metric; tests/helpers/families.py)."""
    p = np.exp(ref.astype(np.float64))
    q = np.exp(np.take_along_axis(other, ids.astype(np.int64), axis=1))
    p_tail = np.clip(1.0 - p.sum(axis=1), 1e-30, None)
    q_tail = np.clip(1.0 - q.sum(axis=1), 1e-30, None)
    return (p * (np.log(p) - np.log(q))).sum(axis=1) + p_tail * (np.log(p_tail) - np.log(q_tail))


def write_k_quant_reference(path: Path) -> None:
    """ggml's own Q4_K, Q5_K and Q6_K (and Q5_0, MXFP4) of awkward floats, by the quantizer
    llama-quantize calls (ggml_quantize_chunk, no importance matrix), for tests/gguf."""
    lib_dir = Path(_llama_cpp().__file__).parent / "lib"
    ggml = ctypes.CDLL(str(lib_dir / "libggml-base.so"))
    ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
    ggml.ggml_quantize_chunk.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    rng = np.random.default_rng(2024)
    x = rng.standard_normal((24, 256)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-5, 3, (24, 1))).astype(np.float32)
    x[0] = 0  # an all-zero super-block
    x[1] = 0.75  # a constant one
    x[2] = np.abs(x[2])  # no negative values: the mins are 0
    x[3, ::7] = 0  # sparse zeros
    x = x.reshape(-1)
    out = {"x": x}
    for name, type_id in (("Q4_K", 12), ("Q5_K", 13), ("Q6_K", 14), ("Q5_0", 6), ("MXFP4", 39)):
        dst = np.zeros(x.size * 2, np.uint8)
        n = ggml.ggml_quantize_chunk(type_id, x.ctypes.data, dst.ctypes.data, 0, 24, 256, None)
        out[name] = dst[:n]
    path.parent.mkdir(exist_ok=True)
    np.savez_compressed(path, **out)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(MODELS))
    parser.add_argument("--quants-only", action="store_true", help="only the quantizer data")
    args = parser.parse_args()
    if args.quants_only:
        write_k_quant_reference(ROOT / "tests" / "data" / "quants" / "ggml_quantize.npz")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    index_path = OUT / "reference.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"files": {}}
    ids = tokens()
    llama_cpp = _llama_cpp()
    index.update(
        {
            "reference": f"llama-cpp-python {llama_cpp.__version__} (its bundled llama.cpp), "
            f"{platform.machine()} {platform.processor() or ''}".strip(),
            "text": f"the first {N_TOKENS} tokens of texts/gpl-3.txt (BOS first)",
            "tokens": ids,
            "top_k": TOP_K,
            "run": "one batch of all tokens, 2 threads, F16 KV cache, no flash attention",
            "calibration": "the same model token by token on 1 thread",
        }
    )
    tmp = OUT / "tmp"
    tmp.mkdir(exist_ok=True)
    for name in args.names:
        f16 = tmp / f"{name}-F16.gguf"
        config = write_f16(name, f16)
        files = {"F16": (f16, None)}
        ftypes = ["Q8_0", "Q4_K_M"] + (["MXFP4_MOE"] if config["arch"] == "gpt-oss" else [])
        for ftype in ftypes:
            theirs, ours = tmp / f"{name}-{ftype}-llama.gguf", tmp / f"{name}-{ftype}.gguf"
            quantize(f16, theirs, ftype)
            types = {n: t.type for n, t in gguf.read(theirs).tensors.items()}
            synthetic.requantize(f16, ours, ftype, types)
            if not same_tensors(ours, theirs):
                sys.exit(f"{name}: llamay's {ftype} differs from llama-quantize's")
            files[ftype] = (ours, types)
        for type_name, (path, types) in files.items():
            ref = llama_cpp_logprobs(path, ids, threads=2, n_batch=512)
            token_by_token = llama_cpp_logprobs(path, ids, threads=1, n_batch=1)
            flash = llama_cpp_logprobs(path, ids, threads=2, n_batch=512, flash_attn=True)
            top_ids, top_logprobs = top_k(ref)
            kl_batch = coarse_kl(top_ids, top_logprobs, token_by_token)
            kl_flash = coarse_kl(top_ids, top_logprobs, flash)
            stem = f"{name}-{type_name}"
            np.savez_compressed(OUT / f"{stem}.npz", ids=top_ids, logprobs=top_logprobs)
            index["files"][stem] = {
                "model": name,
                "type": type_name,
                "sha256": sha256(path),
                "write_model": config,
                "tensor_types": types
                and {t: sorted(n for n, v in types.items() if v == t) for t in set(types.values())},
                "self_kl_token_by_token": float(kl_batch.mean()),
                "self_kl_flash_attn": float(kl_flash.mean()),
                "self_argmax_agreement": float((flash.argmax(1) == top_ids[:, 0]).mean()),
            }
            print(
                f"{stem}: self KL {kl_batch.mean():.3g} (token by token), "
                f"{kl_flash.mean():.3g} (flash attention)"
            )
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    write_k_quant_reference(ROOT / "tests" / "data" / "quants" / "ggml_quantize.npz")


if __name__ == "__main__":
    main()
