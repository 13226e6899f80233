"""State engine speed on a real model: time to first token for a prompt cold and with a cached
prefix, and snapshot save / restore throughput.

TTFT: a fresh context fed `--prompt` tokens (logits after the last one), with the prefix tree
emptied first (cold), then again after another context fed the first `--cached` of them and
closed (the prefix tree keeps its full pages). Snapshots: a `--prompt`-token context saved to a
file and restored, in MB/s of snapshot file. Each figure is the median of `--repeat` runs.

    python bench/bench_state.py [--model gemma3:270m] [--threads 2] [--prompt 2000]
                                [--cached 1900] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import llamay

TEXT = Path(__file__).parent.parent / "tests" / "data" / "texts" / "gpl-3.txt"


def ttft(model: llamay.engine.Model, ids: list[int]) -> float:
    with model.context() as ctx:
        start = time.perf_counter()
        ctx.feed(ids)
        ctx.logits()
        return time.perf_counter() - start


def ttft_cold(model: llamay.engine.Model, ids: list[int]) -> float:
    model.kv_cache.clear_prefix_cache()
    return ttft(model, ids)


def ttft_cached(model: llamay.engine.Model, ids: list[int], cached: int) -> float:
    model.kv_cache.clear_prefix_cache()
    with model.context() as ctx:
        ctx.feed(ids[:cached])
    return ttft(model, ids)  # its full pages within the first `cached` tokens come cached


def snapshot_mb_s(
    model: llamay.engine.Model, ids: list[int], directory: Path
) -> tuple[float, float]:
    path = directory / "ctx.kv"
    with model.context() as ctx:
        ctx.feed(ids)
        start = time.perf_counter()
        ctx.save(path)
        saved = time.perf_counter() - start
    start = time.perf_counter()
    model.restore(path).close()
    restored = time.perf_counter() - start
    megabytes = path.stat().st_size / 1e6
    return megabytes / saved, megabytes / restored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3:270m", help="MODEL: a .gguf path or store name")
    parser.add_argument("--threads", type=int, default=None, help="OpenMP threads")
    parser.add_argument("--prompt", type=int, default=2000, help="prompt tokens")
    parser.add_argument("--cached", type=int, default=1900, help="tokens of it cached")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per figure")
    args = parser.parse_args()

    model = llamay.load(args.model, threads=args.threads, n_ctx=args.prompt)
    ids = model.tokenize(TEXT.read_text())[: args.prompt]
    if len(ids) < args.prompt:
        parser.error(f"the text has only {len(ids)} tokens")
    # printing the fingerprint hashes the file now, so that no save figure includes it
    print(f"{model.path.name} ({model.fingerprint[:12]}), {model.threads} threads")
    cold = statistics.median(ttft_cold(model, ids) for _ in range(args.repeat))
    cached = statistics.median(ttft_cached(model, ids, args.cached) for _ in range(args.repeat))
    print(f"TTFT, {args.prompt}-token prompt, cold:              {cold * 1000:9.1f} ms")
    print(f"TTFT, same with a cached {args.cached}-token prefix: {cached * 1000:9.1f} ms")
    with tempfile.TemporaryDirectory() as directory:
        runs = [snapshot_mb_s(model, ids, Path(directory)) for _ in range(args.repeat)]
    save = statistics.median(run[0] for run in runs)
    restore = statistics.median(run[1] for run in runs)
    print(f"snapshot of {args.prompt} tokens: save {save:7.0f} MB/s, restore {restore:7.0f} MB/s")


if __name__ == "__main__":
    main()
