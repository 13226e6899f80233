"""Forward-step speed on a real model: prefill and decode tokens per second per thread count.

Prefill: a fresh context fed `--prompt` tokens of text (logits after the last one only), as
llama-bench's pp test. Decode: `--gen` steps of one token each after a `--context`-token prompt
(logits every step, the argmax fed back), as its tg test (which starts from an empty context).
Each figure is the median of `--repeat` runs.

    python bench/bench_forward.py [--model gemma3:270m] [--threads 1,2] [--prompt 512]
                                  [--gen 64] [--context 0] [--repeat 3] [--json]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve as resolve_shape

TEXT = Path(__file__).parent.parent / "tests" / "data" / "texts" / "gpl-3.txt"


def prefill_tps(model: llamay.engine.Model, ids: list[int]) -> float:
    with model.context() as ctx:
        start = time.perf_counter()
        ctx.feed(ids)
        return len(ids) / (time.perf_counter() - start)


def decode_tps(model: llamay.engine.Model, prompt: list[int], n: int) -> float:
    with model.context() as ctx:
        ctx.feed(prompt)
        token = int(np.argmax(ctx.logits()))
        start = time.perf_counter()
        for _ in range(n):
            ctx.feed([token])
            token = int(np.argmax(ctx.logits()))
        return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="gemma3:270m",
        help="MODEL: a .gguf path, a store name, or SHAPE:TYPE of bench/models.py",
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--prompt", type=int, default=512, help="prefill tokens")
    parser.add_argument("--gen", type=int, default=64, help="decode steps")
    parser.add_argument("--context", type=int, default=0, help="tokens before decoding")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--json", action="store_true", help="print one JSON list")
    args = parser.parse_args()
    args.model = resolve_shape(args.model)

    results = []
    for threads in (int(t) for t in args.threads.split(",")):
        model = llamay.load(args.model, threads=threads, prefix_cache=False)  # time compute
        text_ids = model.tokenize(TEXT.read_text())
        ids = (text_ids * (1 + args.prompt // len(text_ids)))[: args.prompt]
        # the decode prompt: BOS alone (llama-bench's tg) or the first --context tokens
        prompt = text_ids[: max(1, args.context)]
        prefill_tps(model, ids[:32])  # warm up: page in the weights
        prefill = statistics.median(prefill_tps(model, ids) for _ in range(args.repeat))
        decode = statistics.median(decode_tps(model, prompt, args.gen) for _ in range(args.repeat))
        results.append(
            {
                "threads": threads,
                "prefill_tps": round(prefill, 1),
                "decode_tps": round(decode, 1),
                "prompt_tokens": len(ids),
                "gen_tokens": args.gen,
                "context_tokens": len(prompt),
                "kernels": model.kernels,
            }
        )
        model.close()
        if not args.json:
            r = results[-1]
            print(
                f"threads {threads}: prefill {r['prefill_tps']} tok/s ({len(ids)} tokens), "
                f"decode {r['decode_tps']} tok/s ({args.gen} after {len(prompt)}), "
                f"kernels {r['kernels']}"
            )
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
