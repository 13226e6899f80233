"""What speculation gains: prompt lookup (`--lookup`) and a draft model (`--draft`), alone and
together, on a code-editing prompt (a source file, then a request to write it out again with
one change, so that most of the answer repeats the prompt) and on a code-writing prompt (fresh
code, nothing to copy).

Greedy generation of `--max-tokens` tokens in each mode, the modes in turn round after round so
that all see the same machine load; the tokens must be identical in every mode (speculation
changes the steps, never the tokens). Reports decode tokens/s per mode (the median of
`--repeat` runs after a warm-up round), the speed-up over plain decoding, how many generated
tokens came from accepted drafts (each one a forward step saved) and, for the draft model, the
share of its proposed tokens the target accepted.

    python bench/bench_speculation.py --model qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b
                                      [--prompt edit|write|both] [--lookup 8] [--threads 1]
                                      [--max-tokens 256] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from models import resolve  # shapes and real models by name (run as bench/bench_speculation.py)

import llamay

SOURCE = Path(__file__).parent.parent / "llamay" / "engine" / "lookup.py"

PROMPTS = {
    "edit": lambda: (
        "Here is a Python module:\n\n```python\n" + SOURCE.read_text() + "```\n\n"
        "Write the whole module out again, unchanged except that the function `propose` is "
        "renamed `draft`. Reply with the code only."
    ),
    "write": lambda: (
        "Write a Python module that parses a CSV file of (date, account, amount) rows, groups "
        "the amounts by account and month, and prints a table of monthly totals per account. "
        "Use only the standard library, with type hints and docstrings."
    ),
}


@dataclass
class Run:
    tokens: list[int]
    seconds: float
    accepted: int  # generated tokens that came from accepted drafts
    proposed: int  # tokens the draft model proposed (0 without one)
    by_draft: int  # of those, accepted by the target


def timed(model: llamay.engine.Model, ids: list[int], max_tokens: int, lookup: int, draft: bool):
    generation = model.generate(
        ids, max_tokens=max_tokens, temperature=0, lookup=lookup, draft=draft
    )
    pieces = iter(generation.pieces())
    next(pieces)  # the first token ends the prefill
    started = time.perf_counter()
    for _ in pieces:
        pass
    seconds = time.perf_counter() - started
    drafter = generation.drafter
    run = Run(
        list(generation.tokens),
        seconds,
        generation.draft_accepted,
        drafter.proposed if drafter is not None else 0,
        drafter.accepted if drafter is not None else 0,
    )
    generation.context.close()
    return run


def measure(model, ids: list[int], modes: dict[str, tuple[int, bool]], args) -> dict:
    runs: dict[str, list[Run]] = {name: [] for name in modes}
    for i in range(args.repeat + 1):
        for name, (lookup, draft) in modes.items():
            run = timed(model, ids, args.max_tokens, lookup, draft)
            if i:  # the first round warms up
                runs[name].append(run)
    plain = runs["plain"][0].tokens
    for name, results in runs.items():
        if results[0].tokens != plain:
            raise SystemExit(f"{name} changed the tokens: a determinism bug")
    n = len(plain) - 1
    tps = {
        name: statistics.median(n / r.seconds for r in results) for name, results in runs.items()
    }
    report = {"prompt_tokens": len(ids), "gen_tokens": len(plain), "modes": {}}
    for name, results in runs.items():
        first = results[0]
        report["modes"][name] = {
            "decode_tps": round(tps[name], 2),
            "speedup": round(tps[name] / tps["plain"], 2),
            "tokens_from_drafts": first.accepted,
            "draft_acceptance": round(first.by_draft / first.proposed, 3)
            if first.proposed
            else None,
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3:270m")
    parser.add_argument("--draft", help="a draft model of the same vocabulary")
    parser.add_argument("--prompt", choices=["edit", "write", "both"], default="both")
    parser.add_argument("--lookup", type=int, default=8)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    modes: dict[str, tuple[int, bool]] = {
        "plain": (0, False),
        f"lookup {args.lookup}": (args.lookup, False),
    }
    if args.draft:
        modes["draft"] = (0, True)
        modes[f"draft + lookup {args.lookup}"] = (args.lookup, True)
    options = {"draft": resolve(args.draft)} if args.draft else {}
    prompts = ["edit", "write"] if args.prompt == "both" else [args.prompt]
    reports = []
    with llamay.load(
        resolve(args.model), threads=args.threads, n_ctx=4096, prefix_cache=False, **options
    ) as model:
        for prompt in prompts:
            messages = [{"role": "user", "content": PROMPTS[prompt]()}]
            rendered = model.chat_template.render(messages, add_generation_prompt=True)
            ids = model.tokenize(rendered, add_bos=False)
            report = measure(model, ids, modes, args)
            report.update(model=args.model, draft=args.draft, prompt=prompt, threads=model.threads)
            reports.append(report)
    if args.json:
        print(json.dumps(reports))
        return
    for report in reports:
        print(
            f"{report['model']}{' drafted by ' + report['draft'] if report['draft'] else ''}, "
            f"{report['prompt']} prompt, {report['threads']} threads: {report['prompt_tokens']} "
            f"prompt tokens, {report['gen_tokens']} generated (identical in every mode)"
        )
        for name, mode in report["modes"].items():
            acceptance = mode["draft_acceptance"]
            print(
                f"  {name:<18} {mode['decode_tps']:7.2f} t/s  {mode['speedup']:.2f}x  "
                f"{mode['tokens_from_drafts']:4d} tokens from drafts"
                + (f", {acceptance:.0%} of the draft's proposals accepted" if acceptance else "")
            )


if __name__ == "__main__":
    main()
