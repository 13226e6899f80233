"""Decode attention alone, on a real model's KV layout: one token's query heads against every
layer and KV head of a context `--depth` positions deep, as one decode step computes them.

The pages are filled with random K and V and placed in a shuffled order (a long-lived context's
pages lie anywhere in the arena); the figure is milliseconds per token step and the GB/s of KV
bytes it reads, for each kernel set the machine runs. Threads are the engine's business, not
this script's: it calls the kernel from one thread, as one unit of the engine's split. With
--hot every position reads the first page (each layer and head its own block of it, in cache
after the first tile): the arithmetic alone, so that the difference to a run without it is what
memory adds.

    python bench/bench_attention.py [--shape llama-1b] [--depth 4096] [--kv-type f16]
                                    [--page-tokens 32] [--kernels reference,avx2] [--repeat 5]
                                    [--hot] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType
from gguf import quants as gguf_quants

from llamay._core import kernels as E
from llamay._core.pages import PageMemory
from llamay.state.layout import KV_TYPES, PAGE_TOKENS, KVLayout

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import SHAPES


def filled_pages(
    shape, depth: int, page_tokens: int, dtype: str, rng: np.random.Generator
) -> PageMemory:
    n_pages = depth // page_tokens + 1
    memory = PageMemory(shape.n_layer, shape.n_head_kv, shape.head_dim, page_tokens, dtype, n_pages)
    for page in range(n_pages):
        for layer in range(shape.n_layer):
            for view in (memory.k_view(page, layer), memory.v_view(page, layer)):
                x = rng.standard_normal((*view.shape[:2], shape.head_dim)).astype(np.float32)
                if dtype == "Q8_0":
                    view[...] = gguf_quants.quantize(x, GGMLQuantizationType.Q8_0)
                else:
                    view[...] = x.astype(view.dtype)
    return memory


def step_seconds(
    memory: PageMemory, shape, pages: np.ndarray, q: np.ndarray, pos: int, kernels: str
) -> float:
    scale = 1.0 / np.sqrt(shape.head_dim)
    started = time.perf_counter()
    for layer in range(shape.n_layer):
        for head in range(shape.n_head_kv):
            E.attention(memory, pages, layer, head, q, pos, 0, scale, 0.0, kernels)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="llama-1b", choices=sorted(SHAPES))
    parser.add_argument("--depth", type=int, default=4096, help="positions in the context")
    parser.add_argument("--kv-type", default="f16", choices=[t.lower() for t in KV_TYPES])
    parser.add_argument(
        "--page-tokens",
        type=int,
        default=KVLayout.page_tokens,
        choices=PAGE_TOKENS,
        help="positions a page (the engine's default unless given)",
    )
    parser.add_argument(
        "--kernels", default=",".join(E.kernel_sets()), help="comma-separated kernel sets"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed steps (median shown)")
    parser.add_argument(
        "--hot", action="store_true", help="every position reads the first page (in cache)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    args = parser.parse_args()
    if args.depth < 1 or args.repeat < 1:
        parser.error("--depth and --repeat must be at least 1")
    unknown = set(args.kernels.split(",")) - {"best", *E.kernel_sets()}
    if unknown:
        parser.error(f"unknown kernel sets {sorted(unknown)}; known: {', '.join(E.kernel_sets())}")

    shape = SHAPES[args.shape]
    rng = np.random.default_rng(0)
    memory = filled_pages(shape, args.depth, args.page_tokens, args.kv_type.upper(), rng)
    pages = rng.permutation(memory.n_pages).astype(np.int32)
    if args.hot:
        pages[:] = 0
    group = shape.n_head // shape.n_head_kv
    q = rng.standard_normal((group, shape.head_dim)).astype(np.float32)
    kv_bytes = memory.page_bytes * args.depth / args.page_tokens

    rows = []
    for kernels in args.kernels.split(","):
        step_seconds(memory, shape, pages, q, args.depth - 1, kernels)  # warm-up
        times = [
            step_seconds(memory, shape, pages, q, args.depth - 1, kernels)
            for _ in range(args.repeat)
        ]
        seconds = statistics.median(times)
        rows.append(
            {
                "shape": shape.name,
                "depth": args.depth,
                "kv_type": args.kv_type,
                "page_tokens": args.page_tokens,
                "kernels": kernels,
                "hot": args.hot,
                "ms_per_step": round(1000 * seconds, 2),
                "kv_gb_per_s": round(kv_bytes / seconds / 1e9, 2),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{shape.name} ({shape.like}): {shape.n_layer} layers x {shape.n_head_kv} KV heads of "
        f"{shape.head_dim}, {group} query heads each; depth {args.depth}, {args.kv_type} KV "
        f"in pages of {args.page_tokens}{', every position on the first page' if args.hot else ''}"
    )
    print(f"{'kernels':<12}{'ms a step':>10}{'KV GB/s':>10}")
    for row in rows:
        print(f"{row['kernels']:<12}{row['ms_per_step']:>10}{row['kv_gb_per_s']:>10}")


if __name__ == "__main__":
    main()
