"""What `--state-dir` costs, and what a second replica gives (docs/deploy.md, "Several replicas").

costs: on the model, a context of N tokens (1,000 and 4,000) written as a snapshot into a
state directory (the writer thread's work: fork, save with fsync, rename), restored from it,
and computed again from its tokens (what a replica without the snapshot would do). Medians of
`--repeat` runs.

fleet: `--clients` sessions through nginx (deploy/nginx/llamay.conf), each a context made from
a prompt and then generated in, `--tokens` at a time (greedy), for `--seconds`: one replica
(`--threads` per forward step) against two (half as many each), sharing one state directory.

    python bench/bench_fleet.py costs [--model gemma3:270m] [--threads 2] [--repeat 5]
    python bench/bench_fleet.py fleet [--clients 8] [--seconds 40] [--tokens 32] [--replicas 1,2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

import llamay

REPO = Path(__file__).resolve().parents[1]
TEXT = REPO / "tests" / "data" / "texts" / "gpl-3.txt"


def costs(args: argparse.Namespace) -> None:
    from llamay.server.statedir import StateDir

    model = llamay.load(args.model, threads=args.threads, n_ctx=8192, kv_memory="1GiB")
    ids = model.tokenize(TEXT.read_text())
    print(f"model {args.model}, {args.threads} threads; medians of {args.repeat}")
    print("| tokens | snapshot bytes | write (ms) | restore (ms) | recompute (ms) |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        store = StateDir(Path(folder), "bench", 60)
        store.acquire("ctx-bench")
        path = store.snapshot_path("ctx-bench")
        manifest = {"model": args.model, "fingerprint": model.fingerprint}
        for n in (1000, 4000):
            write, restore, recompute = [], [], []
            for _ in range(args.repeat):
                model.kv_cache.clear_prefix_cache()  # computed from nothing, as on a new replica
                start = time.perf_counter()
                ctx = model.context()
                ctx.feed(ids[:n])
                ctx.logits()
                recompute.append(time.perf_counter() - start)
                start = time.perf_counter()  # what the writer thread does for one change
                fork = ctx.fork()
                store.commit(
                    "ctx-bench",
                    lambda target, fork=fork: fork.save(target, note={"model": args.model}),
                    manifest | {"n_tokens": n},
                )
                fork.close()
                write.append(time.perf_counter() - start)
                ctx.close()
                start = time.perf_counter()
                model.restore(path).close()
                restore.append(time.perf_counter() - start)
            size = os.path.getsize(path)
            print(
                f"| {n} | {size:,} | {1000 * statistics.median(write):.1f} "
                f"| {1000 * statistics.median(restore):.1f} "
                f"| {1000 * statistics.median(recompute):.0f} |"
            )


def fleet(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from llamay.store import resolve_model

    from helpers.fleet import Nginx, Replica, find_nginx, free_port

    binary, why = find_nginx()
    if binary is None:
        sys.exit(why)
    path = resolve_model(args.model)
    print(f"{args.clients} sessions, {args.tokens} tokens a request, {args.seconds:g}s each")
    print("| replicas | threads each | requests | errors | tokens/s | p50 request |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n_replicas in (int(n) for n in args.replicas.split(",")):
        threads = max(1, args.threads // n_replicas)
        with tempfile.TemporaryDirectory(dir=args.dir) as folder:
            root = Path(folder)
            extra = ("--model-threads", str(threads), "--ctx-size", "4096", "--kv-memory", "2GiB")
            replicas = [
                Replica(f"r{i}", free_port(), path, root / "state", root / f"home{i}", extra)
                for i in range(n_replicas)
            ]
            ports = [r.port for r in replicas] * (2 // n_replicas)
            nginx = Nginx(binary, root / "nginx", free_port(), tuple(ports[:2]))
            try:
                for replica in replicas:
                    replica.start()
                nginx.start()
                result = _load(nginx.url, args)
            finally:
                nginx.stop()
                for replica in replicas:
                    replica.stop()
        requests, errors, tokens, latencies, seconds = result
        print(
            f"| {n_replicas} | {threads} | {requests} | {errors} | {tokens / seconds:.1f} "
            f"| {statistics.median(latencies):.2f} s |"
        )


def _load(url: str, args: argparse.Namespace) -> tuple[int, int, int, list[float], float]:
    lock = threading.Lock()
    totals = {"requests": 0, "errors": 0, "tokens": 0}
    latencies: list[float] = []
    prompt = TEXT.read_text()[:400]
    # One request first, so that each replica has loaded the model before the clock starts.
    with httpx.Client(base_url=url, timeout=600) as client:
        for _ in range(8):
            client.post(
                "/v1/completions",
                json={"model": "tiny", "prompt": "hi", "max_tokens": 1},
                headers={"x-llamay-session": uuid.uuid4().hex},
            )
    deadline = time.monotonic() + args.seconds

    def session() -> None:
        key = uuid.uuid4().hex
        with httpx.Client(base_url=url, timeout=600, headers={"x-llamay-session": key}) as c:
            made = c.post("/llamay/v1/contexts", json={"model": "tiny", "prompt": prompt})
            if made.status_code != 201:
                with lock:
                    totals["errors"] += 1
                return
            context_id = made.json()["id"]
            while time.monotonic() < deadline:
                start = time.perf_counter()
                answer = c.post(
                    f"/llamay/v1/contexts/{context_id}/generate",
                    json={"max_tokens": args.tokens, "temperature": 0},
                )
                with lock:
                    totals["requests"] += 1
                    if answer.status_code != 200:
                        totals["errors"] += 1
                    else:
                        totals["tokens"] += len(answer.json()["tokens"])
                        latencies.append(time.perf_counter() - start)
            c.delete(f"/llamay/v1/contexts/{context_id}")

    started = time.monotonic()
    threads = [threading.Thread(target=session) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return totals["requests"], totals["errors"], totals["tokens"], latencies or [0.0], elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["costs", "fleet"])
    parser.add_argument("--model", default="gemma3:270m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--replicas", default="1,2", help="fleet: replica counts to compare")
    parser.add_argument("--dir", help="where the state directory goes (default: the temp dir)")
    args = parser.parse_args()
    costs(args) if args.what == "costs" else fleet(args)


if __name__ == "__main__":
    main()
