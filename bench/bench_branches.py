"""What a branch costs the chat page: a new answer in a fork of a conversation against the same
conversation sent again to a new context, over HTTP, against a running `llamay serve`.

For each conversation length, a context is made from that many tokens of text (each run's
text begins differently, so that the prefix cache holds none of it); then a fork of it answers
one token (what regenerating an answer does). Reported, medians of --repeat runs: the seconds
to make the context (its prefill: what a page without forks pays again for each branch), to
fork it, and from the answer's request to its first token; and the branch's KV pages, shared
with the conversation and its own.

    llamay serve --ctx-size 1024 &
    python bench/bench_branches.py [--url http://127.0.0.1:11435] [--model gemma3:270m]
                                   [--tokens 128,512,896] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import httpx

TEXT = Path(__file__).parent.parent / "tests" / "data" / "texts" / "gpl-3.txt"


def first_token_seconds(api: httpx.Client, context_id: str) -> float:
    body = {"max_tokens": 1, "temperature": 0, "stream": True}
    started = time.perf_counter()
    with api.stream("POST", f"/llamay/v1/contexts/{context_id}/generate", json=body) as events:
        for line in events.iter_lines():
            if line.startswith("event: token"):
                return time.perf_counter() - started
    raise RuntimeError("the answer sent no token")


def measure(api: httpx.Client, model: str, text: str) -> dict[str, float]:
    started = time.perf_counter()
    made = api.post("/llamay/v1/contexts", json={"model": model, "prompt": text})
    made.raise_for_status()
    prefill = time.perf_counter() - started
    started = time.perf_counter()
    fork = api.post(f"/llamay/v1/contexts/{made.json()['id']}/fork").json()
    forked = time.perf_counter() - started
    first = first_token_seconds(api, fork["id"])
    pages = api.get(f"/llamay/v1/contexts/{fork['id']}").json()["pages"]
    for context in (made.json(), fork):
        api.delete(f"/llamay/v1/contexts/{context['id']}")
    return {
        "tokens": made.json()["n_tokens"],
        "prefill_s": prefill,
        "fork_s": forked,
        "first_token_s": first,
        "shared": pages["shared"],
        "own": pages["own"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:11435")
    parser.add_argument("--model", default="gemma3:270m")
    parser.add_argument("--tokens", default="128,512,896")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    words = TEXT.read_text().split()
    rows = []
    with httpx.Client(base_url=args.url, timeout=600) as api:
        for n in (int(part) for part in args.tokens.split(",")):
            runs = []
            for run in range(args.repeat + 1):  # the first run warms the model up, unrecorded
                # about 1.3 tokens per word of this text; a per-run opening defeats the cache
                text = f"Run {time.time_ns()}-{run}. " + " ".join(words[: int(n / 1.35)])
                result = measure(api, args.model, text)
                if run:
                    runs.append(result)
            rows.append({key: statistics.median(r[key] for r in runs) for key in runs[0]})
    print("| tokens | prefill s | fork s | first token of the branch s | pages shared / own |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['tokens']:.0f} | {row['prefill_s']:.3f} | {row['fork_s']:.3f} | "
            f"{row['first_token_s']:.3f} | {row['shared']:.0f} / {row['own']:.0f} |"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
