"""Tokenizer speed: loading a vocabulary, and tokenizing a 35 KB text with it.

Targets (Gemma 3's 262,144-token vocabulary, the GPL v3 text): load under 1 s, tokenize under
50 ms. Prints medians over --repeat runs; --json prints them as one object.

    python bench/bench_tokenizer.py [--model gemma3:270m] [--text FILE] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from llamay import load_tokenizer

DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "tests" / "data" / "texts" / "gpl-3.txt"


def _median_seconds(run, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3:270m", help="MODEL: a .gguf path or store name")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="the text to tokenize")
    parser.add_argument("--repeat", type=int, default=7, help="runs per measurement")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    text = args.text.read_text(encoding="utf-8")
    load_s, tokenizer = _median_seconds(lambda: load_tokenizer(args.model), args.repeat)
    tokenize_s, ids = _median_seconds(lambda: tokenizer.tokenize(text), args.repeat)
    detokenize_s, _ = _median_seconds(lambda: tokenizer.detokenize(ids), args.repeat)
    result = {
        "model": args.model,
        "n_vocab": tokenizer.n_vocab,
        "text_bytes": len(text.encode("utf-8")),
        "tokens": len(ids),
        "load_ms": round(load_s * 1000, 1),
        "tokenize_ms": round(tokenize_s * 1000, 1),
        "detokenize_ms": round(detokenize_s * 1000, 1),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"vocabulary  {args.model}: {tokenizer.n_vocab} tokens, loaded in {result['load_ms']} ms")
    print(
        f"tokenize    {args.text.name} ({result['text_bytes']} bytes -> {len(ids)} tokens): "
        f"{result['tokenize_ms']} ms"
    )
    print(f"detokenize  {len(ids)} tokens: {result['detokenize_ms']} ms")


if __name__ == "__main__":
    main()
