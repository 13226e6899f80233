"""What each kernel set computes, as digests: the logits of a prompt and the greedy tokens after
it, on small synthetic models whose matrices take the 32-element, the K-quant and the fp16
kernels. CI runs it natively and under `qemu-x86_64 -cpu Haswell` (a CPU without AVX-512) on
the installed wheel, and compares: every set must give the same bits.

    python tools/kernel_bits.py [--kernels best|all|NAME,...] [--out FILE] [--same-as FILE]
                                [--expect-best NAME]

Prints (or writes to FILE) {"best", "features", "results": {MODEL: {SET: {"tokens", "logits"}}}}.
--same-as FILE: exit 1 unless every digest here equals every digest in FILE, whatever the set.
--expect-best NAME: exit 1 unless NAME is the set `best` picks on this CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import llamay
from llamay._core import _cpu
from llamay.models.synthetic import requantize, write_builtin

PROMPT = "Determinism is a promise about bits, kept on every CPU."
GREEDY_TOKENS = 12
WEIGHT_TYPES = ("Q4_K", "Q6_K", "Q5_0", "F16")


def models(folder: Path) -> dict[str, Path]:
    """The built-in model (Q8_0) and the same weights in each of WEIGHT_TYPES."""
    builtin = write_builtin(folder / "Q8_0.gguf")
    made = {"Q8_0": builtin}
    for weight_type in WEIGHT_TYPES:
        made[weight_type] = requantize(builtin, folder / f"{weight_type}.gguf", weight_type)
    return made


def digest(path: Path, kernels: str) -> dict[str, object]:
    model = llamay.load(path, kernels=kernels, threads=2)
    try:
        ids = model.tokenize(PROMPT)
        with model.context() as ctx:
            logits = ctx.feed(ids, all_logits=True)
        tokens = [int(t) for t in model.generate(ids, max_tokens=GREEDY_TOKENS, temperature=0)]
        return {
            "kernels": model.kernels,
            "tokens": tokens,
            "logits": hashlib.sha256(logits.tobytes()).hexdigest(),
        }
    finally:
        model.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="all", help="best, all, or names joined by commas")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--same-as", type=Path)
    parser.add_argument("--expect-best")
    args = parser.parse_args()
    sets = _cpu.usable_kernel_sets() if args.kernels == "all" else args.kernels.split(",")
    with tempfile.TemporaryDirectory(prefix="llamay-bits-") as tmp:
        results = {
            name: {k: digest(path, k) for k in sets} for name, path in models(Path(tmp)).items()
        }
    report = {"best": _cpu.best_kernel_set(), "features": _cpu.features(), "results": results}
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    failures = []
    if args.expect_best and report["best"] != args.expect_best:
        failures.append(f"best is {report['best']}, not {args.expect_best}")
    seen = {
        name: {(tuple(r["tokens"]), r["logits"]) for r in by_set.values()}
        for name, by_set in results.items()
    }
    if args.same_as:
        for name, by_set in json.loads(args.same_as.read_text())["results"].items():
            seen[name] |= {(tuple(r["tokens"]), r["logits"]) for r in by_set.values()}
    for name, distinct in seen.items():
        if len(distinct) != 1:
            failures.append(f"{name}: the kernel sets disagree ({len(distinct)} different results)")
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    if not failures:
        ran = sorted({r["kernels"] for by_set in results.values() for r in by_set.values()})
        compared = f" and those of {args.same_as.name}" if args.same_as else ""
        print(
            f"kernel bits: best is {report['best']}; {', '.join(ran)}{compared} give the same "
            f"tokens and logits on {', '.join(results)}",
            file=sys.stderr,
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
