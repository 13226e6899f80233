"""Matmul speed on a real model's weight shapes: decode (1 token) and prefill (512 tokens).

For each distinct (type, rows, columns) weight of the model: decode as GB/s of weight bytes
streamed, prefill as GFLOP/s (2 x rows x columns x tokens). Then a whole decode step: every
weight matrix once (the tied output matrix included), as a forward pass reads them; small
matrices timed alone stay in cache, so this pass is the figure that says tokens per second.
Weights are read where the file maps them, or copied into 2 MiB pages (--hugepages), as the
engine may repack hot tensors. Activation quantization is included in every time.

`--rows R` asks what the arithmetic alone can do: the first R rows of one weight of each (type,
columns), small enough to stay in cache, timed for each token count of `--tokens` on one thread,
as GB/s of weight bytes consumed. A one-token kernel keeps up with memory when that rate is above
one core's streaming rate (bench/probes/read_bandwidth.c on the same machine).

    python bench/bench_matmul.py [--model gemma3:270m] [--threads 1,2] [--hugepages] [--json]
    python bench/bench_matmul.py --model llama-1b:Q4_K_M --rows 64 --tokens 1,2,4,8
"""

from __future__ import annotations

import argparse
import json
import mmap
import sys
from pathlib import Path

import numpy as np

from llamay._core import matmul as mm
from llamay.gguf import BY_ID, read
from llamay.store import resolve_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve as resolve_shape

PREFILL_TOKENS = 512
MATMUL_WEIGHTS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def matmul_weights(path) -> list[tuple[str, np.ndarray, int, int, int]]:
    """(name, bytes, type id, rows, columns) of every weight a forward pass multiplies by."""
    gguf = read(path)
    tensors = gguf.tensors
    output = tensors.get("output.weight", tensors["token_embd.weight"])
    chosen = [t for t in tensors.values() if t.name.split(".")[-2] in MATMUL_WEIGHTS]
    return [(t.name, t.data, t.type_id, t.shape[1], t.shape[0]) for t in [*chosen, output]]


def in_huge_pages(data: np.ndarray) -> np.ndarray:
    """A copy of data in anonymous memory advised to use 2 MiB pages."""
    buffer = mmap.mmap(-1, max(data.nbytes, 1))
    buffer.madvise(mmap.MADV_HUGEPAGE)
    copy = np.frombuffer(buffer, dtype=np.uint8, count=data.nbytes)
    copy[:] = data
    return copy


def measure(products, n_tokens: int, threads: int, budget_s: float, kernels: str) -> float:
    """Seconds per pass, repeating for about budget_s seconds."""
    once = mm.time_matmuls(products, n_tokens, threads=threads, repeats=1, kernels=kernels)
    repeats = max(1, min(1000, round(budget_s / max(once, 1e-6))))
    return mm.time_matmuls(products, n_tokens, threads=threads, repeats=repeats, kernels=kernels)


def in_cache(weights: list, rows: int) -> list:
    """The first `rows` rows of one weight of each (type, columns) of `weights`."""
    chosen = {}
    for name, data, w_type, n_rows, cols in weights:
        if (w_type, cols) not in chosen:
            kept = min(rows, n_rows)
            chosen[w_type, cols] = (name, data[: len(data) // n_rows * kept], w_type, kept, cols)
    return list(chosen.values())


def in_cache_rates(weights, rows: int, tokens: list[int], budget_s: float, kernels: str) -> list:
    """GB/s of weight bytes consumed, one thread, by the first `rows` rows of one weight of each
    (type, columns), for each token count."""
    out = []
    for name, data, w_type, kept, cols in in_cache(weights, rows):
        entry = {"tensor": name, "type": BY_ID[w_type].name, "rows": kept, "cols": cols}
        for n in tokens:
            seconds = measure([(data, w_type, kept, cols)], n, 1, budget_s, kernels)
            entry[f"gbs_n{n}"] = round(data.nbytes / seconds / 1e9, 2)
        out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="gemma3:270m",
        help="MODEL: a .gguf path, a store name, or SHAPE:TYPE of bench/models.py",
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--hugepages", action="store_true", help="copy weights into 2 MiB pages")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    parser.add_argument(
        "--kernels", default="best", choices=["best", *mm.kernel_sets()], help="kernel set"
    )
    parser.add_argument(
        "--step-tokens",
        type=int,
        default=1,
        help="tokens of the whole-step figure (8: a decode step of eight sequences)",
    )
    parser.add_argument("--rows", type=int, help="in cache: the first ROWS rows of each kind")
    parser.add_argument("--tokens", default="1", help="token counts of --rows, comma-separated")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.rows is not None and args.rows < 1:
        parser.error("--rows must be at least 1")
    args.model = resolve_shape(args.model)
    threads = [int(t) for t in args.threads.split(",")]

    weights = matmul_weights(resolve_model(args.model))
    if args.hugepages:
        weights = [(n, in_huge_pages(d), t, r, c) for n, d, t, r, c in weights]
    kernels = mm.best_kernel_set() if args.kernels == "best" else args.kernels
    if args.rows:
        tokens = [int(t) for t in args.tokens.split(",")]
        rates = in_cache_rates(weights, args.rows, tokens, args.budget, kernels)
        if args.json:
            print(json.dumps({"model": args.model, "kernels": kernels, "in_cache": rates}))
            return
        print(f"{args.model}, kernels {kernels}, one thread, weights in cache: GB/s consumed")
        for e in rates:
            cells = "  ".join(f"{n} tok: {e[f'gbs_n{n}']:6.2f}" for n in tokens)
            print(f"  {e['type']:5s} {e['rows']:4d} x {e['cols']:5d}  {cells}  ({e['tensor']})")
        return
    shapes = {}
    for name, data, w_type, rows, cols in weights:
        shapes.setdefault((w_type, rows, cols), (name, data))

    results = {"model": args.model, "kernels": kernels, "shapes": [], "decode": []}
    for (w_type, rows, cols), (name, data) in shapes.items():
        product = [(data, w_type, rows, cols)]
        entry = {"tensor": name, "type": BY_ID[w_type].name, "rows": rows, "cols": cols}
        for n in threads:
            decode = measure(product, 1, n, args.budget, kernels)
            prefill = measure(product, PREFILL_TOKENS, n, args.budget, kernels)
            entry[f"decode_gbs_t{n}"] = round(data.nbytes / decode / 1e9, 2)
            entry[f"prefill_gflops_t{n}"] = round(
                2 * rows * cols * PREFILL_TOKENS / prefill / 1e9, 1
            )
        results["shapes"].append(entry)

    step = [(data, w_type, rows, cols) for _, data, w_type, rows, cols in weights]
    step_bytes = sum(data.nbytes for data, *_ in step)
    for n in threads:
        seconds = measure(step, args.step_tokens, n, 2 * args.budget, kernels)
        results["decode"].append(
            {
                "threads": n,
                "step_tokens": args.step_tokens,
                "ms_per_step": round(seconds * 1e3, 2),
                "tokens_per_s": round(args.step_tokens / seconds, 1),
                "gbs": round(step_bytes / seconds / 1e9, 2),
            }
        )

    if args.json:
        print(json.dumps(results))
        return
    print(f"{args.model}, kernels {results['kernels']}, threads {args.threads}")
    print("decode GB/s and prefill GFLOP/s (512 tokens) per weight shape:")
    for e in results["shapes"]:
        cells = "  ".join(
            f"t{n}: {e[f'decode_gbs_t{n}']:6.2f} GB/s {e[f'prefill_gflops_t{n}']:6.1f} GFLOP/s"
            for n in threads
        )
        print(f"  {e['type']:5s} {e['rows']:6d} x {e['cols']:5d}  {cells}  ({e['tensor']})")
    print(
        f"whole decode step of {args.step_tokens} token(s): {len(step)} matrices, "
        f"{step_bytes / 1e6:.0f} MB"
    )
    for d in results["decode"]:
        print(
            f"  t{d['threads']}: {d['ms_per_step']:6.2f} ms/step "
            f"({d['tokens_per_s']:.1f} tokens/s), {d['gbs']:.2f} GB/s"
        )


if __name__ == "__main__":
    main()
