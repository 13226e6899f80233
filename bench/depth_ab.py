"""Two builds' decode at depth, in whole engines, in turn: what a deep context adds to a token.

`bench/attention_ab.sh` times the attention kernel alone, and a change that helped there once
made the engine's decode at depth slower (docs/performance.md, "AVX-512 trees side by side").
This runs `bench/bench_depth.py --json` from checkout A, then from checkout B, `--runs` times,
each in its own process with the checkout first on PYTHONPATH (both built in place), and
reports each build's medians: the empty-context and deep decode, and the milliseconds a token
that the deep context adds (1000 / deep - 1000 / empty), with the median of the runs' B/A
ratios of that cost.

    python bench/depth_ab.py A B [--model llama-1b:Q4_K_M] [--threads 1] [--runs 2]
                                 [--rounds 6] [--depth 4096] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkouts import ab_args, ab_parser, run_json


def one_run(checkout: Path, args: argparse.Namespace) -> dict:
    """bench_depth.py's report, run with checkout's llamay."""
    report = run_json(
        checkout,
        "bench_depth.py",
        f"--model={args.model}",
        f"--threads={args.threads}",
        f"--rounds={args.rounds}",
        f"--depth={args.depth}",
    )
    report["added_ms"] = 1000 / report["depth_tps"] - 1000 / report["empty_tps"]
    return report


def main() -> None:
    parser = ab_parser(__doc__, threads=1, runs=2)
    parser.add_argument("--rounds", type=int, default=6, help="bench_depth.py rounds a run")
    parser.add_argument("--depth", type=int, default=4096)
    args = ab_args(parser)
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for _ in range(args.runs):
        for name, checkout in (("A", args.a), ("B", args.b)):
            runs[name].append(one_run(checkout.resolve(), args))
    # a shallow context may add nothing measurable: no ratio for such runs
    ratios = [
        b["added_ms"] / a["added_ms"]
        for a, b in zip(runs["A"], runs["B"], strict=True)
        if a["added_ms"] > 0
    ]
    ratio = statistics.median(ratios) if ratios else None
    if args.json:
        print(
            json.dumps(
                {
                    "model": args.model,
                    "threads": args.threads,
                    "depth": args.depth,
                    "a": runs["A"],
                    "b": runs["B"],
                    "ratio": ratio,
                }
            )
        )
        return
    for name in ("A", "B"):
        reports = runs[name]
        each = ", ".join(f"{r['added_ms']:.2f}" for r in reports)
        print(
            f"{name}: empty {statistics.median(r['empty_tps'] for r in reports):.2f} t/s, "
            f"after {args.depth} {statistics.median(r['depth_tps'] for r in reports):.2f} t/s, "
            f"the depth adds {statistics.median(r['added_ms'] for r in reports):.2f} ms a token "
            f"(runs: {each})"
        )
    if ratio is None:
        print(f"{args.model}, {args.threads} thread(s): the depth added no time to A's tokens")
        return
    print(
        f"{args.model}, {args.threads} thread(s): the depth's cost B/A median "
        f"{ratio:.3f} (runs {min(ratios):.3f}-{max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
