"""A large synthetic mixture-of-experts model: peak memory against the file's size, and speed.

Writes a Qwen 3 MoE file of random Q8_0 weights (`--gb` gigabytes, most of it experts), then,
in a fresh process, loads it, prefills `--prompt` tokens and decodes `--gen`, and reports the
peak resident set (VmHWM) as a multiple of the file's size (llamay packs every expert into
huge pages and drops the file's pages as it goes, so the weights are never held twice), and the
prefill and decode speeds.

    python bench/bench_moe.py [--gb 2] [--threads 2] [--prompt 128] [--gen 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from llamay.models import synthetic

VOCAB = synthetic.vocabulary([f"▁w{i}" for i in range(4000)], byte_fallback=True)


def write(path: Path, gb: float) -> Path:
    """Experts of 1024 x 512 (8 of 64 chosen), 1024-wide attention, as many layers as fit."""
    per_layer = (3 * 64 * 512 * 1024 + 4 * 1024 * 1024) * 34 / 32  # Q8_0 bytes
    n_layer = max(1, round(gb * 2**30 / per_layer))
    return synthetic.write_model(
        path,
        "qwen3moe",
        VOCAB,
        n_embd=1024,
        n_ff=512,
        n_ff_exp=512,
        n_expert=64,
        n_expert_used=8,
        n_layer=n_layer,
        n_head=8,
        n_head_kv=4,
        head_dim=128,
        context_length=4096,
        weight_type="Q8_0",
    )


def peak_rss() -> int:
    """This process's peak resident set, in bytes: VmHWM, which (unlike ru_maxrss) starts anew
    at exec and so does not count the parent that wrote the model."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run(path: Path, threads: int, prompt: int, gen: int) -> dict:
    import llamay

    model = llamay.load(path, threads=threads, n_ctx=1024)
    ids = np.random.default_rng(0).integers(300, model.n_vocab, prompt).tolist()
    with model.context() as ctx:
        start = time.perf_counter()
        ctx.feed(ids)
        prefill = prompt / (time.perf_counter() - start)
        token = int(np.argmax(ctx.logits()))
        start = time.perf_counter()
        for _ in range(gen):
            ctx.feed([token])
            token = int(np.argmax(ctx.logits()))
        decode = gen / (time.perf_counter() - start)
    peak = peak_rss()
    size = path.stat().st_size
    return {
        "file_bytes": size,
        "peak_rss_bytes": peak,
        "peak_over_file": peak / size,
        "prefill_tps": prefill,
        "decode_tps": decode,
        "threads": threads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--gen", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # the measuring child process
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run(Path(args.run), args.threads, args.prompt, args.gen)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "moe.gguf", args.gb)
        child = [sys.executable, __file__, "--run", str(path), "--threads", str(args.threads)]
        child += ["--prompt", str(args.prompt), "--gen", str(args.gen)]
        result = json.loads(
            subprocess.run(child, check=True, capture_output=True, text=True).stdout
        )
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"file {result['file_bytes'] / 2**30:.2f} GiB, peak RSS "
            f"{result['peak_rss_bytes'] / 2**30:.2f} GiB ({result['peak_over_file']:.3f}x); "
            f"prefill {result['prefill_tps']:.1f} tok/s, decode {result['decode_tps']:.2f} tok/s "
            f"({result['threads']} threads)"
        )


if __name__ == "__main__":
    main()
