"""Aggregate decode speed with 1, 4, 8 and 16 sequences generating at once on one model.

Each sequence runs in its own thread: `model.generate` after a short prompt of its own (so no
prefix is shared), greedy, end-of-generation tokens banned so that every sequence makes exactly
`--max-tokens`. The model's scheduler batches them into shared forward steps. The decode phase
is the time during which every sequence is decoding: from the moment the last one receives its
first token to the moment the first one receives its last. The aggregate speed is the sum of
each sequence's own speed in that window: the intervals between its tokens there over their
span. (Counting the tokens all sequences receive in the window over its length undercounts a
batch: the tokens of a step reach their threads one after another, and the first to receive
its last token ends the window before the others' arrive, so n - 1 tokens of the window's last
step fall out of it: 3% with 8 sequences of 32 tokens.) Each figure is the median of
`--repeat` runs, after a warm-up; the counts take turns, one run of each per round.

    python bench/bench_concurrency.py [--model gemma3:270m] [--threads 2]
                                      [--concurrency 1,4,8,16] [--max-tokens 64]
                                      [--repeat 3] [--kv-memory 1GiB] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import llamay

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve as resolve_shape

TEXT = Path(__file__).parent.parent / "tests" / "data" / "texts" / "gpl-3.txt"
PROMPT_TOKENS = 16


def generate_timed(
    model: llamay.engine.Model, prompt: list[int], max_tokens: int, start: threading.Barrier
) -> list[float]:
    """The time each generated token arrived, generating after prompt once all threads start."""
    ban = {token: float("-inf") for token in model.tokenizer.eog_ids}
    start.wait()
    generation = model.generate(prompt, max_tokens=max_tokens, temperature=0, logit_bias=ban)
    arrivals = [time.perf_counter() for _ in generation]
    generation.context.close()
    return arrivals


def decode_tps(model: llamay.engine.Model, prompts: list[list[int]], max_tokens: int) -> float:
    """Aggregate tokens/s of len(prompts) sequences generating at once, in the decode phase."""
    start = threading.Barrier(len(prompts))
    with ThreadPoolExecutor(len(prompts)) as pool:
        jobs = [pool.submit(generate_timed, model, p, max_tokens, start) for p in prompts]
        arrivals = [np.asarray(job.result()) for job in jobs]
    return aggregate_rate(arrivals)


def aggregate_rate(arrivals: list[np.ndarray]) -> float:
    """Tokens/s of all sequences together while every one is decoding, from the times each
    sequence's tokens arrived: the sum of each one's rate between the last first token and the
    first last token."""
    begin = max(times[0] for times in arrivals)
    end = min(times[-1] for times in arrivals)
    total = 0.0
    for times in arrivals:
        inside = times[(times >= begin) & (times <= end)]
        if len(inside) < 2:
            raise SystemExit("too few tokens while every sequence decodes: raise --max-tokens")
        total += (len(inside) - 1) / (inside[-1] - inside[0])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="gemma3:270m",
        help="MODEL: a .gguf path, a store name, or SHAPE:TYPE of bench/models.py",
    )
    parser.add_argument("--threads", type=int, default=None, help="OpenMP threads")
    parser.add_argument(
        "--concurrency", default="1,4,8,16", help="comma-separated numbers of sequences"
    )
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens per sequence")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per figure")
    parser.add_argument("--kv-memory", default="1GiB", help="KV cache budget (touched as used)")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one row per run")
    args = parser.parse_args()
    args.model = resolve_shape(args.model)
    counts = [int(n) for n in args.concurrency.split(",")]

    # Room for every sequence's prompt and tokens; no prefix cache, so every prompt is computed.
    model = llamay.load(
        args.model,
        threads=args.threads,
        n_ctx=PROMPT_TOKENS + args.max_tokens,
        kv_memory=args.kv_memory,
        prefix_cache=False,
    )
    ids = model.tokenize(TEXT.read_text(), add_bos=False)
    bos = [model.tokenizer.bos_id] if model.tokenizer.bos_id is not None else []
    prompts = [bos + ids[i * 97 : i * 97 + PROMPT_TOKENS - len(bos)] for i in range(max(counts))]
    decode_tps(model, prompts[:2], 8)  # warm-up: scheduler thread, packed weights, caches

    # The counts take turns, a run of each per round: the machine's speed drifts by more than
    # the ratios between them within minutes.
    runs: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(args.repeat):
        for n in counts:
            runs[n].append(decode_tps(model, prompts[:n], args.max_tokens))
    rows = []
    for n in counts:
        aggregate = statistics.median(runs[n])
        rows.append(
            {
                "sequences": n,
                "aggregate_tps": round(aggregate, 2),
                "per_sequence_tps": round(aggregate / n, 2),
                "threads": model.threads,
                "max_tokens": args.max_tokens,
            }
        )
    model.close()
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{args.model}, {model.threads} threads, {args.max_tokens} tokens per sequence")
    single = rows[0]["aggregate_tps"] if rows[0]["sequences"] == 1 else None
    print(f"{'sequences':>9}  {'aggregate t/s':>13}  {'per sequence t/s':>16}  {'vs 1':>5}")
    for row in rows:
        ratio = f"{row['aggregate_tps'] / single:5.2f}" if single else f"{'':>5}"
        print(
            f"{row['sequences']:>9}  {row['aggregate_tps']:>13.1f}  "
            f"{row['per_sequence_tps']:>16.1f}  {ratio}"
        )


if __name__ == "__main__":
    main()
