"""Decode after a deep context as a share of llamay's own empty-context decode, in one process.

`llamay bench` times the two in separate runs, and on a shared machine its speed can move by
more than the difference being measured. Here one context is filled with `--depth` tokens once;
then each round decodes `--n-gen` tokens one at a time on a fresh context (after 16 tokens) and
on a fork of the deep one, back to back, so that both halves of a round see the same machine.
Reports the medians of each and the median of the rounds' ratios.

A fresh context takes consecutive pages, whose blocks lie in runs (llamay/_core/csrc/pages.h).
`--interleave N` fills the deep context a page at a time in turn with N - 1 others, as N
streams decoding together take pages, so that its pages are every Nth one (the others are
closed before the rounds).

    python bench/bench_depth.py [--model llama-1b:Q4_K_M] [--depth 4096] [--threads 1]
                                [--n-gen 24] [--rounds 10] [--interleave 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import llamay
from llamay.state.context import Context

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve


def decode_tps(context: Context, ids: list[int]) -> float:
    """Tokens a second, feeding ids one at a time (the first two warm the step up, untimed)."""
    for token in ids[:2]:
        context.feed([token])
    started = time.perf_counter()
    for token in ids[2:]:
        context.feed([token])
    return (len(ids) - 2) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="llama-1b:Q4_K_M", help="a path, store name or SHAPE:TYPE"
    )
    parser.add_argument("--depth", type=int, default=4096)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--n-gen", type=int, default=24, help="decode tokens a run (2 untimed)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--interleave", type=int, default=1, help="contexts filled a page each in turn (1-3)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.depth < 16 or args.n_gen < 3 or args.rounds < 1:
        parser.error("--depth must be at least 16, --n-gen at least 3, --rounds at least 1")
    if not 1 <= args.interleave <= 3:  # the model's pages are for 4 full contexts
        parser.error("--interleave must be 1, 2 or 3")

    n_ctx = args.depth + args.n_gen + 16
    with llamay.load(
        resolve(args.model), threads=args.threads, n_ctx=n_ctx, prefix_cache=False
    ) as model:
        rng = np.random.default_rng(0)
        ids = rng.integers(0, model.n_vocab, size=args.depth + args.n_gen).tolist()
        deep = model.context()
        others = [model.context() for _ in range(args.interleave - 1)]
        step = model.page_tokens if others else args.depth
        for start in range(0, args.depth, step):
            for context in [deep, *others]:
                context.feed(ids[start : min(start + step, args.depth)])
        for context in others:
            context.close()
        gen = ids[args.depth :]
        empty_tps, deep_tps = [], []
        for _ in range(args.rounds):
            with model.context() as fresh:
                fresh.feed(ids[:16])
                empty_tps.append(decode_tps(fresh, gen))
            with deep.fork() as fork:
                deep_tps.append(decode_tps(fork, gen))
        deep.close()
        report = {
            "model": args.model,
            "threads": model.threads,
            "depth": args.depth,
            "interleave": args.interleave,
            "rounds": args.rounds,
            "empty_tps": round(statistics.median(empty_tps), 2),
            "depth_tps": round(statistics.median(deep_tps), 2),
            "share": round(
                statistics.median(d / e for e, d in zip(empty_tps, deep_tps, strict=True)), 3
            ),
        }
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"{report['model']}, {report['threads']} threads, {args.rounds} rounds of "
        f"{args.n_gen - 2} timed tokens: empty context {report['empty_tps']} t/s, after "
        f"{args.depth} tokens {report['depth_tps']} t/s, median share {report['share']}"
    )


if __name__ == "__main__":
    main()
