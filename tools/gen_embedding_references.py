"""Writes tests/data/embeddings: small synthetic encoders (BERT with mean and CLS pooling,
nomic-bert, a BERT cross-encoder reranker) and llama.cpp's pooled embeddings and rerank scores
on them; tests/models/test_embeddings_llama_cpp.py holds llamay to them.

    PYTHONPATH=. /work/llcpp/bin/python tools/gen_embedding_references.py

It needs llama-cpp-python (the `bench` extra); nothing else does. As for the decoder families
(tools/gen_family_references.py): the F16 file is llamay.models.synthetic.write_model's, the
Q8_0 file llama-quantize's, made again by synthetic.requantize with the types llama.cpp chose
and checked byte for byte; no model file is committed, the test writes each one again from its
recipe (reference.json) and checks its sha256.

The vocabulary is WordPiece (tokenizer.ggml.model = bert), 2,048 tokens: BERT's specials, then
the characters and the most common words of texts/gpl-3.txt. Each input is tokenized by llamay
and by llama.cpp, which must agree; llama.cpp's vector comes from one sequence alone in a batch
on 2 threads; the calibration runs all inputs in one batch on 1 thread.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import hashlib
import json
import platform
import re
import sys
from pathlib import Path

import numpy as np

from llamay import gguf
from llamay.models import synthetic

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "embeddings"
TEXT = ROOT / "tests" / "data" / "texts" / "gpl-3.txt"
N_VOCAB = 2048
COMMON = {
    "n_embd": 256,
    "n_ff": 512,
    "n_layer": 2,
    "n_head": 4,
    "n_head_kv": 4,
    "head_dim": 64,
    "context_length": 512,
}
# name: (architecture, llama_pooling_type, write_model options)
MODELS = {
    "bert-mean": ("bert", 1, {}),
    "bert-cls": ("bert", 2, {"metadata": {"bert.pooling_type": 2}}),
    "nomic-bert": ("nomic-bert", 1, {"metadata": {"nomic-bert.rope.freq_base": 1000.0}}),
    "bert-rerank": ("bert", 4, {"n_cls_out": 1}),
}
FTYPES = ("F16", "Q8_0")


def pieces(text: str) -> list[str]:
    """Every character of the text as a word start and as a continuation, then its most
    common lower-cased words (ties alphabetical), to 2,048 tokens in all."""
    lower = text.lower()
    chars = sorted({c for c in lower if not c.isspace()})
    out = [f"\u2581{c}" for c in chars] + list(chars)
    counts = collections.Counter(re.findall(r"[a-z]+", lower))
    words = sorted(counts, key=lambda w: (-counts[w], w))
    out += [f"\u2581{w}" for w in words if len(w) > 1][: N_VOCAB - 104 - len(out)]
    return out


def inputs(text: str) -> list[str]:
    """Six inputs of different lengths, cut from the text."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return [
        "freedom",
        paragraphs[3],
        paragraphs[4],
        paragraphs[5][:300],
        " ".join(paragraphs[6:9])[:1200],
        "The licenses for most software are designed to take away your freedom.",
    ]


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError:
        sys.exit("llama-cpp-python is not installed: pip install '.[bench]'")
    return llama_cpp


def quantize(source: Path, dest: Path, ftype: str) -> None:
    llama_cpp = _llama_cpp()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = synthetic.FILE_TYPES[ftype]
    params.nthread = 2
    if llama_cpp.llama_model_quantize(
        str(source).encode(), str(dest).encode(), ctypes.byref(params)
    ):
        sys.exit(f"llama_model_quantize {source} -> {ftype} failed")


def same_tensors(a: Path, b: Path) -> bool:
    ta, tb = gguf.read(a).tensors, gguf.read(b).tensors
    return ta.keys() == tb.keys() and all(
        ta[n].type == tb[n].type and np.array_equal(ta[n].data, tb[n].data) for n in ta
    )


def llama_cpp_vectors(
    path: Path, pooling: int, sequences: list[list[int]], threads: int, together: bool
) -> tuple[list[np.ndarray], list[list[int]]]:
    """llama.cpp's pooled vector (a rank model: its n_cls_out scores) of each sequence, each
    decoded alone or all in one batch; and llama.cpp's tokens of the texts."""
    llama_cpp = _llama_cpp()
    llm = llama_cpp.Llama(
        model_path=str(path),
        embedding=True,
        pooling_type=pooling,
        n_ctx=2048,
        n_batch=2048,
        n_ubatch=2048,
        n_seq_max=8,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    width = 1 if pooling == 4 else llm.n_embd()
    groups = [sequences] if together else [[s] for s in sequences]
    out = []
    for group in groups:
        llm._batch.reset()
        for seq_id, ids in enumerate(group):
            llm._batch.add_sequence(ids, seq_id, True)
        llm._ctx.kv_cache_clear()
        llm._ctx.decode(llm._batch)
        for seq_id in range(len(group)):
            ptr = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, seq_id)
            out.append(np.array(ptr[:width], dtype=np.float32))
    llm.close()
    return out


def llama_cpp_tokens(path: Path, texts: list[str]) -> list[list[int]]:
    llama_cpp = _llama_cpp()
    llm = llama_cpp.Llama(model_path=str(path), embedding=True, vocab_only=True, verbose=False)
    tokens = [llm.tokenize(t.encode(), add_bos=True, special=False) for t in texts]
    llm.close()
    return tokens


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    import llamay

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    text = TEXT.read_text()
    index_path = OUT / "reference.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"files": {}}
    vocab_pieces = pieces(text)
    texts = inputs(text)
    index.update(
        {
            "reference": f"llama-cpp-python {_llama_cpp().__version__} (its bundled llama.cpp), "
            f"{platform.machine()} {platform.processor() or ''}".strip(),
            "pieces": vocab_pieces,
            "texts": texts,
            "run": "each input alone in a batch, 2 threads",
            "calibration": "all inputs in one batch, 1 thread",
        }
    )
    vocab = synthetic.wordpiece_vocabulary(vocab_pieces)
    tmp = OUT / "tmp"
    tmp.mkdir(exist_ok=True)
    for name in args.names:
        arch, pooling, options = MODELS[name]
        options = {**COMMON, **options}
        f16 = tmp / f"{name}-F16.gguf"
        synthetic.write_model(f16, arch, vocab, weight_type="F16", seed=16, **options)
        config = {"arch": arch, "seed": 16, "weight_type": "F16", **options}
        files = {"F16": (f16, None)}
        theirs, ours = tmp / f"{name}-Q8_0-llama.gguf", tmp / f"{name}-Q8_0.gguf"
        quantize(f16, theirs, "Q8_0")
        types = {n: t.type for n, t in gguf.read(theirs).tensors.items()}
        synthetic.requantize(f16, ours, "Q8_0", types)
        if not same_tensors(ours, theirs):
            sys.exit(f"{name}: llamay's Q8_0 differs from llama-quantize's")
        files["Q8_0"] = (ours, types)
        ids = llamay.load_tokenizer(str(f16)).tokenize
        sequences = [ids(t) for t in texts]
        if llama_cpp_tokens(f16, texts) != sequences:
            sys.exit(f"{name}: llama.cpp tokenizes the inputs otherwise than llamay")
        for type_name, (path, types) in files.items():
            ref = llama_cpp_vectors(path, pooling, sequences, threads=2, together=False)
            calib = llama_cpp_vectors(path, pooling, sequences, threads=1, together=True)
            stem = f"{name}-{type_name}"
            np.savez_compressed(OUT / f"{stem}.npz", *ref)
            self_cos = min(cosine(a, b) for a, b in zip(ref, calib, strict=True))
            self_diff = max(float(np.abs(a - b).max()) for a, b in zip(ref, calib, strict=True))
            index["files"][stem] = {
                "model": name,
                "type": type_name,
                "pooling": pooling,
                "sha256": sha256(path),
                "write_model": config,
                "tensor_types": types
                and {t: sorted(n for n, v in types.items() if v == t) for t in set(types.values())},
                "self_min_cosine": self_cos,
                "self_max_abs_diff": self_diff,
            }
            print(
                f"{stem}: llama.cpp against itself: min cosine {self_cos:.9f}, max |d| {self_diff:.3g}"
            )
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()
    index_path.write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
