"""What `bench/ab.py depth` and `bench/ab.py concurrency` measure in one build's own process.

Two builds of llamay cannot share a process, so ab.py runs this file once a round for each
build, with that build first on PYTHONPATH, and reads the JSON line it prints. It uses only
llamay's public API, so one copy of it measures any build.

depth: one context is filled with `depth` tokens once; then each of `repeat` rounds decodes
`n_gen` tokens one at a time on a fresh context (after 16 tokens) and on a fork of the deep
one, back to back, so that both halves of a round see the same machine. `interleave` N fills
the deep context a page at a time in turn with N - 1 others, as N streams decoding together
take pages, so that its pages are every Nth one (a fresh context takes consecutive pages, whose
blocks lie in runs: llamay/_core/csrc/pages.h).

concurrency: 1, 8... sequences generating at once through `model.generate`, each in a thread of
its own, so that the model's scheduler thread runs every step, as it does for users
(`llamay bench -s` feeds its batches from the calling thread instead).

    python bench/engine_runs.py depth|concurrency '{"model": PATH, ...}'
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import llamay

TEXT = Path(__file__).resolve().parents[1] / "tests" / "data" / "texts" / "gpl-3.txt"
PROMPT_TOKENS = 16  # each sequence's own prompt, and a fresh context's tokens before decode


def decode_tps(context, ids: list[int]) -> float:
    """Tokens a second, feeding ids one at a time (the first two warm the step up, untimed)."""
    for token in ids[:2]:
        context.feed([token])
    started = time.perf_counter()
    for token in ids[2:]:
        context.feed([token])
    return (len(ids) - 2) / (time.perf_counter() - started)


def measure_depth(
    model: str, depth: int, threads: int | None, n_gen: int, repeat: int, interleave: int
) -> dict:
    """Median decode tokens/s on an empty context and after `depth` tokens, timed in turn, and
    the median of the rounds' shares (deep over empty)."""
    n_ctx = depth + n_gen + PROMPT_TOKENS
    with llamay.load(model, threads=threads, n_ctx=n_ctx, prefix_cache=False) as loaded:
        rng = np.random.default_rng(0)
        ids = rng.integers(0, loaded.n_vocab, size=depth + n_gen).tolist()
        deep = loaded.context()
        others = [loaded.context() for _ in range(interleave - 1)]
        step = loaded.page_tokens if others else depth
        for start in range(0, depth, step):
            for context in [deep, *others]:
                context.feed(ids[start : min(start + step, depth)])
        for context in others:
            context.close()
        gen = ids[depth:]
        empty_tps, deep_tps = [], []
        for _ in range(repeat):
            with loaded.context() as fresh:
                fresh.feed(ids[:PROMPT_TOKENS])
                empty_tps.append(decode_tps(fresh, gen))
            with deep.fork() as fork:
                deep_tps.append(decode_tps(fork, gen))
        deep.close()
        shares = [d / e for e, d in zip(empty_tps, deep_tps, strict=True)]
        return {
            "threads": loaded.threads,
            "empty_tps": statistics.median(empty_tps),
            "depth_tps": statistics.median(deep_tps),
            "share": statistics.median(shares),
        }


def generate_timed(
    model: llamay.engine.Model, prompt: list[int], max_tokens: int, start: threading.Barrier
) -> list[float]:
    """The time each generated token arrived, generating after prompt once all threads start;
    end-of-generation tokens are banned, so that every sequence makes max_tokens."""
    ban = {token: float("-inf") for token in model.tokenizer.eog_ids}
    start.wait()
    generation = model.generate(prompt, max_tokens=max_tokens, temperature=0, logit_bias=ban)
    arrivals = [time.perf_counter() for _ in generation]
    generation.context.close()
    return arrivals


def aggregate_rate(arrivals: list[np.ndarray]) -> float:
    """Tokens/s of all sequences together while every one is decoding (from the last first
    token to the first last token), from the times each sequence's tokens arrived: the sum of
    each one's own rate in that window. Counting the tokens all sequences receive in the window
    over its length would undercount a batch: a step's tokens reach their threads one after
    another, and the first to receive its last token ends the window before the others' arrive
    (3% short with 8 sequences of 32 tokens)."""
    begin = max(times[0] for times in arrivals)
    end = min(times[-1] for times in arrivals)
    total = 0.0
    for times in arrivals:
        inside = times[(times >= begin) & (times <= end)]
        if len(inside) < 2:
            raise SystemExit("too few tokens while every sequence decodes: raise --max-tokens")
        total += (len(inside) - 1) / (inside[-1] - inside[0])
    return total


def sequences_tps(model: llamay.engine.Model, prompts: list[list[int]], max_tokens: int) -> float:
    """Aggregate tokens/s of len(prompts) sequences generating at once."""
    start = threading.Barrier(len(prompts))
    with ThreadPoolExecutor(len(prompts)) as pool:
        jobs = [pool.submit(generate_timed, model, p, max_tokens, start) for p in prompts]
        arrivals = [np.asarray(job.result()) for job in jobs]
    return aggregate_rate(arrivals)


def measure_concurrency(
    model: str, threads: int | None, counts: list[int], max_tokens: int, kv_memory: str
) -> dict:
    """Aggregate decode tokens/s for each number of sequences in counts, each after a prompt of
    its own (no prefix shared, no prefix cache), greedy."""
    with llamay.load(
        model,
        threads=threads,
        n_ctx=PROMPT_TOKENS + max_tokens,
        kv_memory=kv_memory,
        prefix_cache=False,
    ) as loaded:
        ids = loaded.tokenize(TEXT.read_text(), add_bos=False)
        bos = [loaded.tokenizer.bos_id] if loaded.tokenizer.bos_id is not None else []
        prompts = [
            bos + ids[i * 97 : i * 97 + PROMPT_TOKENS - len(bos)] for i in range(max(counts))
        ]
        sequences_tps(loaded, prompts[:2], 8)  # warm-up: scheduler thread, weights, caches
        tps = {str(n): sequences_tps(loaded, prompts[:n], max_tokens) for n in counts}
        return {"threads": loaded.threads, "aggregate_tps": tps}


MEASURES = {"depth": measure_depth, "concurrency": measure_concurrency}


def main() -> None:
    mode, options = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps(MEASURES[mode](**options)))


if __name__ == "__main__":
    main()
