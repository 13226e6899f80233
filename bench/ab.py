"""Two builds of llamay timed in turn on one machine: is B faster than A, and by how much?

On a shared machine the speed moves by more than a change's effect within seconds, so two
builds timed in separate runs say little. Each build is made once; then every round times A,
then B, so that both see about the same machine; the report gives each build's median, the
ratio of the medians as B's speed over A's (above 1: B is faster), and the spread of the
rounds' own ratios, which says how much to trust it.

    python bench/ab.py matmul A B [--model llama-1b:Q4_K_M] [--tokens 1,8,64] [--threads 1]
                                  [--rounds 7] [--kernels avx2] [--rows R] [--json]
    python bench/ab.py depth A B [--model llama-1b:Q4_K_M] [--threads 1] [--rounds 2]
                                 [--depth 4096] [--repeat 6] [--interleave 1] [--json]
    python bench/ab.py concurrency A B [--model llama-1b:Q4_K_M] [--threads 2] [--rounds 3]
                                       [--concurrency 1,8] [--max-tokens 32] [--json]
    python bench/ab.py attention A B [--kernels avx2|avx512] [--depth 4096] [--rounds 30]
                                     [--hot] [--stream] [--shuffled] [--one-group] [--json]

A and B are directories holding a built llamay: checkouts built in place (`git worktree add
/tmp/a REV && (cd /tmp/a && python setup.py build_ext --inplace)`) or a site-packages. For
attention, which compiles the kernels' C sources itself, a git revision of this repository
will do too.

matmul: both builds' matmul modules in one process; a round is a step of every weight matrix of
the model (what a forward step multiplies by) at each token count, then the same bits are
checked on each weight type. --rows R times the first R rows of one weight of each (type,
columns) instead: a few MB that stay in cache, the arithmetic alone without the memory's noise.
depth: whole engines, a process per build a round (bench/engine_runs.py): decode on an empty
context and after --depth tokens, in turn, and what the depth adds to a token (ms).
concurrency: whole engines through `model.generate`, the scheduler's thread running each step:
aggregate decode of each number of sequences.
attention: one decode step's attention over every layer and KV head of the 1B shape at --depth
positions (bench/probes/attention_ab.c), a step of A then one of B; both builds must lay out KV
pages as this tree does. --hot reads every position from the first page (the arithmetic alone),
--stream reads 50 MB between layers (as the weights are read in the engine), --shuffled takes
the pages in a shuffled order, --one-group lays the arena out as one group of pages.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import builds
from bench_matmul import in_cache, matmul_weights
from models import resolve as resolve_shape

from llamay.errors import LlamayError
from llamay.gguf import BY_ID
from llamay.store import resolve_model


@dataclass
class Measure:
    """One figure of both builds, a value a round each: times (lower is faster) or rates."""

    name: str
    unit: str
    a: list[float]
    b: list[float]
    lower_is_faster: bool

    def add(self, a: float, b: float) -> None:
        """A round's values: A's, then B's."""
        self.a.append(a)
        self.b.append(b)

    def speedup(self, a: float, b: float) -> float | None:
        """B's speed over A's from two values (None where either is not positive)."""
        if a <= 0 or b <= 0:
            return None
        return a / b if self.lower_is_faster else b / a

    def report(self) -> dict:
        a, b = statistics.median(self.a), statistics.median(self.b)
        rounds = [self.speedup(x, y) for x, y in zip(self.a, self.b, strict=True)]
        return {
            "name": self.name,
            "unit": self.unit,
            "a": self.a,
            "b": self.b,
            "a_median": a,
            "b_median": b,
            "speedup": self.speedup(a, b),
            "round_speedups": rounds,
        }


def time_measure(name: str, unit: str = "ms") -> Measure:
    return Measure(name, unit, [], [], lower_is_faster=True)


def rate_measure(name: str, unit: str = "t/s") -> Measure:
    return Measure(name, unit, [], [], lower_is_faster=False)


def counts(text: str, option: str, parser: argparse.ArgumentParser) -> list[int]:
    """ "1,8" -> [1, 8]: positive integers, or a one-line usage error."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        parser.error(f"{option} takes comma-separated positive counts, not {text!r}")
    return values


def model_path(name: str, parser: argparse.ArgumentParser) -> str:
    """A model's file: a path, a store name or a SHAPE:TYPE of bench/models.py."""
    try:
        return str(resolve_model(resolve_shape(name)))
    except LlamayError as error:
        parser.error(str(error))


def same_bits(a, b, weights: list, kernels: str) -> bool:
    """Both matmul modules' products of the first weight of each type with the same
    activations, compared bit for bit."""
    rng = np.random.default_rng(0)
    first: dict[int, tuple] = {}
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


def run_matmul(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    tokens = counts(args.tokens, "--tokens", parser)
    if args.rows is not None and args.rows < 1:
        parser.error("--rows must be at least 1")
    model = model_path(args.model, parser)
    a, b = builds.matmul_module(args.a), builds.matmul_module(args.b)
    kernels = a.best_kernel_set() if args.kernels == "best" else args.kernels
    weights = matmul_weights(model)
    if args.rows:
        weights = in_cache(weights, args.rows)
    step = [(data, w_type, rows, cols) for _, data, w_type, rows, cols in weights]
    # in cache a step is short: enough repeats for a round of about as many bytes as a model
    repeats = 2 if not args.rows else max(2, round(8e8 / sum(len(w[0]) for w in step)))
    measures = []
    for n in tokens:
        measure = time_measure(f"step of {n} token(s)")
        for _ in range(args.rounds):
            a_ms, b_ms = (
                1e3
                * module.time_matmuls(
                    step, n, threads=args.threads, repeats=repeats, kernels=kernels
                )
                for module in (a, b)
            )
            measure.add(a_ms, b_ms)
        measures.append(measure)
    where = f", the first {args.rows} rows of each kind (in cache)" if args.rows else ""
    return {
        "about": f"{args.model}{where}, kernels {kernels}, {args.threads} thread(s)",
        "kernels": kernels,
        "rows": args.rows,
        "measures": measures,
        "same_bits": same_bits(a, b, weights, kernels),
    }


def engine_rounds(args: argparse.Namespace, mode: str, options: dict) -> list[tuple[dict, dict]]:
    """`rounds` pairs of engine_runs.py reports of mode, A's then B's, each in its own process."""
    for build in (args.a, args.b):
        builds.require_built(build, "engine")
    return [
        (builds.run_measure(args.a, mode, options), builds.run_measure(args.b, mode, options))
        for _ in range(args.rounds)
    ]


def run_depth(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    if args.depth < 16 or args.n_gen < 3 or args.repeat < 1:
        parser.error("--depth must be at least 16, --n-gen at least 3, --repeat at least 1")
    if not 1 <= args.interleave <= 3:  # the model's KV pages are for 4 full contexts
        parser.error("--interleave must be 1, 2 or 3")
    options = {
        "model": model_path(args.model, parser),
        "depth": args.depth,
        "threads": args.threads,
        "n_gen": args.n_gen,
        "repeat": args.repeat,
        "interleave": args.interleave,
    }
    empty = rate_measure("empty-context decode")
    deep = rate_measure(f"decode after {args.depth} tokens")
    share = rate_measure("share of the empty-context decode", unit="")
    added = time_measure("what the depth adds to a token")
    for ra, rb in engine_rounds(args, "depth", options):
        empty.add(ra["empty_tps"], rb["empty_tps"])
        deep.add(ra["depth_tps"], rb["depth_tps"])
        share.add(ra["share"], rb["share"])
        added.add(*(1000 / r["depth_tps"] - 1000 / r["empty_tps"] for r in (ra, rb)))
    return {
        "about": f"{args.model}, {args.threads or 'default'} thread(s), depth {args.depth}",
        "depth": args.depth,
        "measures": [empty, deep, share, added],
    }


def run_concurrency(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    sequences = counts(args.concurrency, "--concurrency", parser)
    if args.max_tokens < 2:
        parser.error("--max-tokens must be at least 2")
    options = {
        "model": model_path(args.model, parser),
        "threads": args.threads,
        "counts": sequences,
        "max_tokens": args.max_tokens,
        "kv_memory": args.kv_memory,
    }
    aggregate = {n: rate_measure(f"{n} sequence(s), aggregate") for n in sequences}
    # the many-streams figure: n sequences' aggregate over one sequence's, within each run
    over_one = {
        n: rate_measure(f"{n} sequences over one", unit="x")
        for n in sequences
        if n > 1 and 1 in sequences
    }
    for ra, rb in engine_rounds(args, "concurrency", options):
        tps_a, tps_b = ({int(n): v for n, v in r["aggregate_tps"].items()} for r in (ra, rb))
        for n, measure in aggregate.items():
            measure.add(tps_a[n], tps_b[n])
        for n, measure in over_one.items():
            measure.add(tps_a[n] / tps_a[1], tps_b[n] / tps_b[1])
    return {
        "about": f"{args.model}, {args.threads or 'default'} thread(s), {args.max_tokens} "
        "tokens a sequence",
        "measures": [*aggregate.values(), *over_one.values()],
    }


# the attention flags, and the probe's word for each
PROBE_WORDS = {"hot": "hot", "stream": "stream", "shuffled": "shuffled", "one_group": "runs"}
STEP = re.compile(r"^step \d+: A ([0-9.e+-]+) B ([0-9.e+-]+)$", re.MULTILINE)


def run_attention(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    if args.depth < 1 or not 1 <= args.rounds <= 4096:
        parser.error("--depth must be at least 1 and --rounds 1 to 4096")
    flags = [flag for flag in PROBE_WORDS if getattr(args, flag)]
    with tempfile.TemporaryDirectory(prefix="llamay-ab-") as work:
        program = builds.attention_probe(str(args.a), str(args.b), args.kernels, Path(work))
        done = subprocess.run(
            [str(program), str(args.depth), str(args.rounds), *(PROBE_WORDS[f] for f in flags)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode not in (0, 1) or "output bits" not in done.stdout:
        sys.exit(f"the attention probe failed:\n{done.stderr.strip()}")
    measure = time_measure("attention step")
    for a_seconds, b_seconds in STEP.findall(done.stdout):
        measure.add(float(a_seconds) * 1e3, float(b_seconds) * 1e3)
    return {
        "about": f"attention at depth {args.depth}, kernels {args.kernels}"
        + "".join(f", --{flag.replace('_', '-')}" for flag in flags),
        "kernels": args.kernels,
        "depth": args.depth,
        "measures": [measure],
        "same_bits": "output bits the same" in done.stdout,
    }


def print_report(mode: str, report: dict, rounds: int) -> None:
    print(f"{mode}: {report['about']}, {rounds} round(s) of A then B")
    for m in report["measures"]:
        unit = f" {m['unit']}" if m["unit"] else ""
        line = f"  {m['name']}: A {m['a_median']:.3f}{unit}, B {m['b_median']:.3f}{unit}"
        if m["speedup"] is None:
            print(f"{line}; no ratio (a value is not positive)")
            continue
        spread = [r for r in m["round_speedups"] if r is not None]
        print(f"{line}; B/A speed {m['speedup']:.3f} (rounds {min(spread):.3f}-{max(spread):.3f})")
    if report.get("same_bits") is not None:
        print("  output bits the same" if report["same_bits"] else "  OUTPUT BITS DIFFER")


def parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command's parser, and each mode's (whose usage its errors print)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True, metavar="MODE")

    def mode(name: str, rounds: int, what: str) -> argparse.ArgumentParser:
        sub = modes.add_parser(name, help=what, description=what)
        sub.add_argument("a", help="build A")
        sub.add_argument("b", help="build B")
        sub.add_argument("--rounds", type=int, default=rounds, help="A then B, this many times")
        sub.add_argument("--json", action="store_true", help="print one JSON object")
        return sub

    def engine_options(sub: argparse.ArgumentParser, threads: int | None) -> None:
        sub.add_argument("--model", default="llama-1b:Q4_K_M", help="path, name or SHAPE:TYPE")
        sub.add_argument("--threads", type=int, default=threads, help="OpenMP threads")

    matmul = mode("matmul", 7, "a step of every weight matrix of a model, in one process")
    engine_options(matmul, 1)
    matmul.add_argument("--tokens", default="1,8,64", help="comma-separated tokens a step")
    matmul.add_argument("--kernels", default="best", help="kernel set (both builds)")
    matmul.add_argument("--rows", type=int, help="time the first ROWS rows of each kind")
    depth = mode("depth", 2, "decode after a deep context, whole engines")
    engine_options(depth, 1)
    depth.add_argument("--depth", type=int, default=4096, help="tokens in the deep context")
    depth.add_argument("--n-gen", type=int, default=24, help="decode tokens a run (2 untimed)")
    depth.add_argument("--repeat", type=int, default=6, help="decodes of each kind a round")
    depth.add_argument("--interleave", type=int, default=1, help="contexts filled in turn (1-3)")
    concurrency = mode("concurrency", 3, "sequences decoding at once through generate")
    engine_options(concurrency, 2)
    concurrency.add_argument("--concurrency", default="1,8", help="comma-separated sequences")
    concurrency.add_argument("--max-tokens", type=int, default=32, help="tokens a sequence")
    concurrency.add_argument("--kv-memory", default="1GiB", help="KV cache budget")
    attention = mode("attention", 30, "one decode step's attention, the kernels alone")
    attention.add_argument("--kernels", choices=["avx2", "avx512"], default="avx2")
    attention.add_argument("--depth", type=int, default=4096, help="positions attended")
    for flag in ("--hot", "--stream", "--shuffled", "--one-group"):
        attention.add_argument(flag, action="store_true")
    return parser, modes.choices


RUNS = {
    "matmul": run_matmul,
    "depth": run_depth,
    "concurrency": run_concurrency,
    "attention": run_attention,
}


def main() -> None:
    parser, mode_parsers = parsers()
    args = parser.parse_args()
    mode_parser = mode_parsers[args.mode]
    if args.rounds < 1:
        mode_parser.error("--rounds must be at least 1")
    if args.mode != "attention":
        args.a, args.b = Path(args.a).resolve(), Path(args.b).resolve()
        if args.threads is not None and args.threads < 1:
            mode_parser.error("--threads must be at least 1")
    report = RUNS[args.mode](args, mode_parser)
    report["measures"] = [m.report() for m in report["measures"]]
    if args.json:
        print(json.dumps({"mode": args.mode, "a": str(args.a), "b": str(args.b), **report}))
    else:
        print_report(args.mode, report, args.rounds)
    if report.get("same_bits") is False:
        sys.exit(1)


if __name__ == "__main__":
    main()
