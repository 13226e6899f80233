"""Two builds' matmul kernels in one process, in turn: a whole step of every weight of a model.

On a shared machine the speed can move by more than a kernel change within seconds, so two
builds timed in separate runs say little. Here both builds' `llamay._core.matmul` modules are
loaded side by side (each from its own checkout, built in place) and each round times a step
of A, then of B: every weight matrix once, as `bench_matmul.py` times a step. Reports each
build's median milliseconds and the median of the rounds' A/B time ratios (above 1: B is
faster), then checks that both give the same bits on each weight type of the model.

    git worktree add /tmp/a HEAD~1 && (cd /tmp/a && python setup.py build_ext --inplace)
    python bench/matmul_ab.py /tmp/a . [--model llama-1b:Q4_K_M] [--tokens 1,8,64]
                              [--threads 1] [--rounds 7] [--kernels avx2] [--rows R] [--json]

--rows R times the arithmetic alone: a step is then the first R rows of one weight of each
(type, columns) the model has, a few MB that stay in cache, where whole matrices stream from
memory; an arithmetic change shows there without the memory's noise over it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_matmul import matmul_weights
from models import resolve as resolve_shape

from llamay.errors import LlamayError
from llamay.gguf import BY_ID
from llamay.store import resolve_model


def matmul_module(checkout: Path) -> ModuleType:
    """The matmul extension under checkout (built in place, or installed there), loaded beside
    any other."""
    found = sorted((checkout / "llamay" / "_core").glob("matmul.*.so"))
    if not found:
        raise SystemExit(f"{checkout}: no built llamay/_core/matmul module (build it in place)")
    spec = importlib.util.spec_from_file_location("llamay._core.matmul", found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_cache(weights: list, rows: int) -> list:
    """The first `rows` rows of one weight of each (type, columns) of `weights`."""
    chosen = {}
    for name, data, w_type, n_rows, cols in weights:
        if (w_type, cols) not in chosen:
            kept = min(rows, n_rows)
            chosen[w_type, cols] = (name, data[: len(data) // n_rows * kept], w_type, kept, cols)
    return list(chosen.values())


def same_bits(a: ModuleType, b: ModuleType, weights: list, kernels: str) -> bool:
    """Both builds' products of the first weight of each type with the same activations."""
    rng = np.random.default_rng(0)
    first = {}
    for _, data, w_type, rows, cols in weights:
        first.setdefault(w_type, (data, rows, cols))
    for w_type, (data, rows, cols) in first.items():
        x = rng.standard_normal((9, cols), dtype=np.float32)
        out_a = a.matmul(data, w_type, rows, cols, x, threads=1, kernels=kernels)
        out_b = b.matmul(data, w_type, rows, cols, x, threads=1, kernels=kernels)
        if not np.array_equal(out_a.view(np.uint32), out_b.view(np.uint32)):
            print(f"{BY_ID[w_type].name}: the builds' outputs differ", file=sys.stderr)
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="build A: a checkout built in place, or site-packages")
    parser.add_argument("b", type=Path, help="build B: a checkout built in place, or site-packages")
    parser.add_argument(
        "--model", default="llama-1b:Q4_K_M", help="a path, store name or SHAPE:TYPE"
    )
    parser.add_argument("--tokens", default="1,8,64", help="comma-separated tokens a step")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--kernels", default="best", help="kernel set (both builds)")
    parser.add_argument("--rows", type=int, help="time the first ROWS rows of each kind, in cache")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        parser.error(f"--tokens takes comma-separated counts, not {args.tokens!r}")
    if min(args.rounds, args.threads, *tokens, 1 if args.rows is None else args.rows) < 1:
        parser.error("--rounds, --threads, --rows and every --tokens count must be at least 1")

    try:
        model = resolve_model(resolve_shape(args.model))
    except LlamayError as e:
        parser.error(str(e))
    a, b = matmul_module(args.a.resolve()), matmul_module(args.b.resolve())
    kernels = a.best_kernel_set() if args.kernels == "best" else args.kernels
    weights = matmul_weights(model)
    if args.rows:
        weights = in_cache(weights, args.rows)
    step = [(data, w_type, rows, cols) for _, data, w_type, rows, cols in weights]
    # in cache, a step is short: enough repeats for a round of about as many bytes as a model
    repeats = 2 if not args.rows else max(2, round(8e8 / sum(len(w[0]) for w in step)))
    report = {
        "model": args.model,
        "kernels": kernels,
        "threads": args.threads,
        "rows": args.rows,
        "steps": [],
    }
    for n in tokens:
        ms_a, ms_b, ratios = [], [], []
        for _ in range(args.rounds):
            t_a = a.time_matmuls(step, n, threads=args.threads, repeats=repeats, kernels=kernels)
            t_b = b.time_matmuls(step, n, threads=args.threads, repeats=repeats, kernels=kernels)
            ms_a.append(t_a * 1e3)
            ms_b.append(t_b * 1e3)
            ratios.append(t_a / t_b)
        report["steps"].append(
            {
                "tokens": n,
                "ms_a": round(statistics.median(ms_a), 2),
                "ms_b": round(statistics.median(ms_b), 2),
                "speedup": round(statistics.median(ratios), 3),
                "speedup_min": round(min(ratios), 3),
                "speedup_max": round(max(ratios), 3),
            }
        )
    report["same_bits"] = same_bits(a, b, weights, kernels)
    if args.json:
        print(json.dumps(report))
    else:
        rows = f", the first {args.rows} rows of each kind (in cache)" if args.rows else ""
        print(
            f"{args.model}{rows}, kernels {kernels}, {args.threads} thread(s), {args.rounds} rounds"
        )
        for s in report["steps"]:
            print(
                f"  step of {s['tokens']} token(s): A {s['ms_a']} ms, B {s['ms_b']} ms, "
                f"A/B median {s['speedup']} (rounds {s['speedup_min']}-{s['speedup_max']})"
            )
        print("  output bits the same" if report["same_bits"] else "  OUTPUT BITS DIFFER")
    if not report["same_bits"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
