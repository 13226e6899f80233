"""Load test of `llamay serve`: concurrent clients for a while, then every KV page back.

    python bench/load_test.py --clients 16 --seconds 60            # starts its own server
    python bench/load_test.py --url http://127.0.0.1:11435 --clients 8 --seconds 10

Each client loops over three requests, as the SDKs make them: a streamed OpenAI chat
completion, a whole one, and a streamed Anthropic message (max 32 tokens, temperature 0.7).
A request counts as an error if its status is not 200, its stream carries an error event or
ends without its closing event, or it raises. At the end the KV pages held by sequences
(pages used, less those only the prefix cache keeps) must be back to what they were before.
Prints a summary and exits 1 on any error or held page.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

MODEL = "gemma3:270m"
PROMPTS = [
    "Write a haiku about the sea.",
    "List three uses of copper.",
    "Explain what a hash table is, briefly.",
    "Tell me a short story about a fox.",
    "What is the boiling point of water?",
    "Give me two tips for learning to cook.",
]
PAGES = re.compile(r'^llamay_kv_pages\{model="([^"]+)",state="(\w+)"\} (\d+)$', re.M)


@dataclass
class Tally:
    """What the clients did, shared between them under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    first_token: list[float] = field(default_factory=list)

    def record(self, seconds: float, tokens: int, ttft: float | None) -> None:
        with self.lock:
            self.requests += 1
            self.tokens += tokens
            self.latencies.append(seconds)
            if ttft is not None:
                self.first_token.append(ttft)

    def fail(self, message: str) -> None:
        with self.lock:
            self.requests += 1
            self.errors.append(message)


def held_pages(client: httpx.Client) -> int:
    """KV pages held by sequences, over every loaded model."""
    pages: dict[tuple[str, str], int] = {}
    for model, state, n in PAGES.findall(client.get("/metrics").text):
        pages[(model, state)] = int(n)
    models = {model for model, _ in pages}
    return sum(pages[(m, "used")] - pages[(m, "cached")] for m in models)


def openai_stream(client: httpx.Client, prompt: str) -> tuple[int, float | None]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 32,
        "temperature": 0.7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.perf_counter()
    ttft = None
    usage = None
    done = False
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"openai stream: status {response.status_code}")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(f"openai stream: {chunk['error']}")
            if ttft is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                ttft = time.perf_counter() - started
            usage = chunk.get("usage") or usage
    if not done or usage is None:
        raise RuntimeError("openai stream ended without usage and [DONE]")
    return usage["completion_tokens"], ttft


def openai_whole(client: httpx.Client, prompt: str) -> tuple[int, float | None]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 32,
        "temperature": 0.7,
    }
    response = client.post("/v1/chat/completions", json=body)
    if response.status_code != 200:
        raise RuntimeError(f"openai: status {response.status_code}: {response.text[:200]}")
    return response.json()["usage"]["completion_tokens"], None


def anthropic_stream(client: httpx.Client, prompt: str) -> tuple[int, float | None]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 32,
        "temperature": 0.7,
        "stream": True,
    }
    started = time.perf_counter()
    ttft = None
    tokens = None
    stopped = False
    headers = {"anthropic-version": "2023-06-01"}
    with client.stream("POST", "/v1/messages", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"anthropic stream: status {response.status_code}")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "error":
                raise RuntimeError(f"anthropic stream: {event['error']}")
            if event["type"] == "content_block_delta" and ttft is None:
                ttft = time.perf_counter() - started
            if event["type"] == "message_delta":
                tokens = event["usage"]["output_tokens"]
            stopped = event["type"] == "message_stop"
    if not stopped or tokens is None:
        raise RuntimeError("anthropic stream ended without message_delta and message_stop")
    return tokens, ttft


REQUESTS = (openai_stream, openai_whole, anthropic_stream)


def client_loop(url: str, number: int, deadline: float, tally: Tally) -> None:
    with httpx.Client(base_url=url, timeout=120) as client:
        turn = number
        while time.monotonic() < deadline:
            request = REQUESTS[turn % len(REQUESTS)]
            prompt = PROMPTS[turn % len(PROMPTS)]
            turn += 1
            started = time.perf_counter()
            try:
                tokens, ttft = request(client, prompt)
            except Exception as error:  # every failure is a result here
                tally.fail(f"{request.__name__}: {type(error).__name__}: {error}")
            else:
                tally.record(time.perf_counter() - started, tokens, ttft)


def run(url: str, clients: int, seconds: float) -> dict:
    """Load `url` with `clients` for `seconds`; the summary of what happened."""
    with httpx.Client(base_url=url, timeout=120) as client:
        # Load the model first, so that the baseline is a loaded model's.
        openai_whole(client, "Hello")
        baseline = held_pages(client)
        tally = Tally()
        started = time.monotonic()
        deadline = started + seconds
        threads = [
            threading.Thread(target=client_loop, args=(url, n, deadline, tally))
            for n in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        settle = time.monotonic() + 10
        held = held_pages(client)
        while held != baseline and time.monotonic() < settle:
            time.sleep(0.1)
            held = held_pages(client)
    latencies = sorted(tally.latencies) or [0.0]
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": tally.requests,
        "errors": len(tally.errors),
        "first_errors": tally.errors[:5],
        "generated_tokens": tally.tokens,
        "tokens_per_s": round(tally.tokens / elapsed, 1),
        "requests_per_s": round(tally.requests / elapsed, 2),
        "latency_p50_s": round(statistics.median(latencies), 2),
        "latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "first_token_p50_s": round(statistics.median(tally.first_token or [0.0]), 2),
        "pages_held_before": baseline,
        "pages_held_after": held,
    }


def start_server() -> tuple[subprocess.Popen, str]:
    """`llamay serve` (the console script beside this interpreter) on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llamay = Path(sys.executable).parent / "llamay"
    log = tempfile.TemporaryFile()  # noqa: SIM115 - the server writes it while it runs
    server = subprocess.Popen(
        [str(llamay), "serve", "--port", str(port), "--threads", "32"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={k: v for k, v in os.environ.items() if k != "LLAMAY_API_KEY"},
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return server, url
        except httpx.TransportError:
            time.sleep(0.1)
    server.kill()
    log.seek(0)
    raise SystemExit(f"llamay serve did not start: {log.read().decode(errors='replace')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        server, url = start_server()
    try:
        summary = run(url, args.clients, args.seconds)
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    print(json.dumps(summary, indent=2))
    if summary["errors"] or summary["pages_held_after"] != summary["pages_held_before"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
