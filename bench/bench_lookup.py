"""Prompt-lookup decoding's speed-up on a code-editing-like prompt: a source file, then a request
to write it out again with one change, so that most of the answer repeats the prompt.

Greedy generation of `--max-tokens` tokens with lookup off and with `--lookup N` draft tokens,
alternating (off, on, off, on, ...) so that both see the same machine load; the tokens must be
identical (lookup changes the steps, never the tokens). Reports decode tokens/s of each (the
medians of `--repeat` runs after a warm-up), their ratio, and how many generated tokens came
from accepted drafts (each one a forward step saved).

    python bench/bench_lookup.py [--model gemma3:270m] [--lookup 8] [--threads 2]
                                 [--max-tokens 256] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import llamay

SOURCE = Path(__file__).parent.parent / "llamay" / "engine" / "lookup.py"


def prompt_messages() -> list[dict[str, str]]:
    code = SOURCE.read_text()
    return [
        {
            "role": "user",
            "content": "Here is a Python module:\n\n```python\n" + code + "```\n\n"
            "Write the whole module out again, unchanged except that the function `propose` is "
            "renamed `draft`. Reply with the code only.",
        }
    ]


def timed(model: llamay.engine.Model, ids: list[int], max_tokens: int, lookup: int):
    """(tokens, decode seconds, tokens from accepted drafts) of one greedy generation."""
    generation = model.generate(ids, max_tokens=max_tokens, temperature=0, lookup=lookup)
    pieces = iter(generation.pieces())
    next(pieces)  # the first token ends the prefill
    started = time.perf_counter()
    for _ in pieces:
        pass
    seconds = time.perf_counter() - started
    accepted = generation.draft_accepted
    generation.context.close()
    return list(generation.tokens), seconds, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3:270m")
    parser.add_argument("--lookup", type=int, default=8)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with llamay.load(args.model, threads=args.threads, n_ctx=4096, prefix_cache=False) as model:
        rendered = model.chat_template.render(prompt_messages(), add_generation_prompt=True)
        ids = model.tokenize(rendered, add_bos=False)
        runs: dict[int, list[tuple[list[int], float, int]]] = {0: [], args.lookup: []}
        for i in range(args.repeat + 1):
            for lookup in runs:
                result = timed(model, ids, args.max_tokens, lookup)
                if i:  # the first round warms up
                    runs[lookup].append(result)
        tokens = {lookup: results[0][0] for lookup, results in runs.items()}
        if tokens[0] != tokens[args.lookup]:
            raise SystemExit("lookup changed the tokens: a determinism bug")
        n = len(tokens[0]) - 1
        tps = {k: statistics.median(n / seconds for _, seconds, _ in v) for k, v in runs.items()}
        accepted = runs[args.lookup][0][2]
        report = {
            "model": args.model,
            "threads": model.threads,
            "prompt_tokens": len(ids),
            "gen_tokens": len(tokens[0]),
            "lookup": args.lookup,
            "decode_tps_off": round(tps[0], 2),
            "decode_tps_on": round(tps[args.lookup], 2),
            "speedup": round(tps[args.lookup] / tps[0], 2),
            "draft_tokens_accepted": accepted,
        }
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"{report['model']}, {report['threads']} threads, prompt {report['prompt_tokens']} "
        f"tokens, {report['gen_tokens']} generated (identical with and without lookup)\n"
        f"  lookup off: {report['decode_tps_off']:7.2f} t/s\n"
        f"  lookup {args.lookup:<3} {report['decode_tps_on']:7.2f} t/s  ({report['speedup']:.2f}x; "
        f"{accepted} tokens from accepted drafts)"
    )


if __name__ == "__main__":
    main()
