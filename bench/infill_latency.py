"""How long an editor waits for a code completion: time to first token of a fill-in-the-middle
request on a file of about `--tokens` tokens, cold (nothing cached) and after a one-line edit
near the cursor (the prefix cache holds the file as the previous request left it).

The file is llamay's own source (llamay/engine/generate.py, cut to `--tokens` tokens); the
cursor sits at the start of a code line, with the cursor near the file's end and in its
middle; the edit changes the line three lines above the cursor. Each repeat clears the prefix
cache, times the request (cold), then times it again after the edit. Only the tokens from the
edit on are computed then: the rest of the prefix and the whole suffix, which follows the
prefix in the prompt ([PRE] prefix [SUF] suffix [MID]), so the suffix's length sets the cost.
Medians of `--repeat` runs, through Model.infill (the prompt /infill makes, single-file).

    python bench/infill_latency.py --model qwen2.5-coder-1.5b [--tokens 2000] [--repeat 3]
                                   [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import llamay
from llamay.system import system_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve

SOURCE = Path(__file__).resolve().parent.parent / "llamay" / "engine" / "generate.py"
CURSORS = {"near the end": 0.9, "in the middle": 0.5}
EDIT_LINES_ABOVE = 3


def source_lines(model: llamay.engine.Model, n_tokens: int) -> list[str]:
    """The first lines of SOURCE that hold about n_tokens tokens."""
    lines, count = [], 0
    for line in SOURCE.read_text().splitlines(keepends=True):
        count += len(model.tokenize(line, add_bos=False, special=False))
        if count > n_tokens:
            break
        lines.append(line)
    return lines


def cursor_at(lines: list[str], fraction: float) -> int:
    """The first line at or after `fraction` of the file that holds code (a cursor there)."""
    index = int(len(lines) * fraction)
    while index < len(lines) - 1 and not lines[index].strip():
        index += 1
    return index


def split(lines: list[str], at: int) -> tuple[str, str]:
    """(prefix, suffix) with the cursor after line `at`'s indentation."""
    line = lines[at]
    indent = len(line) - len(line.lstrip())
    return "".join(lines[:at]) + line[:indent], line[indent:] + "".join(lines[at + 1 :])


def edited(lines: list[str], at: int) -> list[str]:
    """The file with the line EDIT_LINES_ABOVE above the cursor changed."""
    changed = list(lines)
    target = at - EDIT_LINES_ABOVE
    changed[target] = changed[target].rstrip("\n") + "  # edited\n"
    return changed


def first_token(model: llamay.engine.Model, prefix: str, suffix: str) -> tuple[float, int, int]:
    """(seconds to the first token, prompt tokens, prompt tokens the cache gave)."""
    started = time.perf_counter()
    generation = model.infill(prefix, suffix, max_tokens=1, temperature=0)
    next(iter(generation.pieces()), None)
    seconds = time.perf_counter() - started
    for _ in generation.pieces():
        pass
    generation.context.close()
    return seconds, generation.n_prompt, generation.n_cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tokens", type=int, default=2000, help="the file's size in tokens")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    model = llamay.load(resolve(args.model), threads=args.threads)
    lines = source_lines(model, args.tokens)
    rows = []
    for where, fraction in CURSORS.items():
        at = cursor_at(lines, fraction)
        prefix, suffix = split(lines, at)
        prefix_after, suffix_after = split(edited(lines, at), at)
        cold, warm = [], []
        for _ in range(args.repeat):
            model.kv_cache.clear_prefix_cache()
            seconds, n_prompt, _ = first_token(model, prefix, suffix)
            cold.append(seconds)
            seconds, n_after, n_cached = first_token(model, prefix_after, suffix_after)
            warm.append(seconds)
        rows.append(
            {
                "cursor": where,
                "prompt_tokens": n_prompt,
                "suffix_tokens": len(model.tokenize(suffix, add_bos=False, special=False)),
                "computed_after_edit": n_after - n_cached,
                "cold_ms": statistics.median(cold) * 1000,
                "after_edit_ms": statistics.median(warm) * 1000,
            }
        )
    info = system_info()
    if args.json:
        print(json.dumps({"model": args.model, "cpu": info["cpu"], "rows": rows}, indent=2))
        return
    print(f"{args.model} on {info['cpu']} ({info['kernels']}), threads {model.threads}")
    print(
        "| cursor | prompt tokens | suffix tokens | computed after the edit | cold | after the edit |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['cursor']} | {row['prompt_tokens']:,} | {row['suffix_tokens']:,} | "
            f"{row['computed_after_edit']:,} | {row['cold_ms']:,.0f} ms | "
            f"{row['after_edit_ms']:,.0f} ms |"
        )
    model.close()


if __name__ == "__main__":
    main()
