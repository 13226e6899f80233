"""Two builds' decode through `generate` (the scheduler's thread), in whole engines, in turn.

`llamay bench` and `bench_depth.py` feed contexts from the calling thread; users generate, and
there the model's scheduler thread runs every step. This runs `bench/bench_concurrency.py
--json` from checkout A, then from checkout B, `--runs` times, each in its own process with the
checkout first on PYTHONPATH (both built in place), and reports, for each number of sequences,
each build's median aggregate tokens/s and the median of the runs' B/A ratios.

    python bench/concurrency_ab.py A B [--model llama-1b:Q4_K_M] [--threads 2] [--runs 3]
                                       [--concurrency 1,8] [--max-tokens 32] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkouts import ab_args, ab_parser, run_json


def main() -> None:
    parser = ab_parser(__doc__, threads=2, runs=3)
    parser.add_argument("--concurrency", default="1,8", help="comma-separated sequence counts")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per sequence")
    args = ab_args(parser)
    tps: dict[str, dict[int, list[float]]] = {"A": {}, "B": {}}
    for _ in range(args.runs):
        for name, checkout in (("A", args.a), ("B", args.b)):
            rows = run_json(
                checkout,
                "bench_concurrency.py",
                f"--model={args.model}",
                f"--threads={args.threads}",
                f"--concurrency={args.concurrency}",
                f"--max-tokens={args.max_tokens}",
                "--repeat=1",
            )
            for row in rows:
                tps[name].setdefault(row["sequences"], []).append(row["aggregate_tps"])
    report = []
    for n, a_runs in tps["A"].items():
        b_runs = tps["B"][n]
        ratios = [b / a for a, b in zip(a_runs, b_runs, strict=True)]
        report.append(
            {
                "sequences": n,
                "a_tps": statistics.median(a_runs),
                "b_tps": statistics.median(b_runs),
                "ratio": statistics.median(ratios),
                "ratios": ratios,
            }
        )
    if args.json:
        print(json.dumps({"model": args.model, "threads": args.threads, "rows": report}))
        return
    print(f"{args.model}, {args.threads} thread(s), {args.runs} runs of each build in turn")
    for row in report:
        print(
            f"{row['sequences']:>3} sequences: A {row['a_tps']:.1f} t/s, B {row['b_tps']:.1f} "
            f"t/s, B/A median {row['ratio']:.3f} "
            f"(runs {min(row['ratios']):.3f}-{max(row['ratios']):.3f})"
        )


if __name__ == "__main__":
    main()
