"""Streams leave the server as they are made, and a client that goes away frees its pages."""

from __future__ import annotations

import itertools
import re
import time

import httpx

# Gemma's end-of-generation tokens (<eos>, <end_of_turn>), banned so that a stream runs to
# max_tokens whatever the model would say.
NO_EOG = {"1": -100, "106": -100}
PAGES = re.compile(r'^llamay_kv_pages\{model="gemma3:270m",state="(\w+)"\} (\d+)$', re.M)


def held_pages(server) -> int:
    """KV pages held by sequences (used, less those only the prefix cache keeps)."""
    text = httpx.get(server.url("/metrics")).text
    pages = {state: int(n) for state, n in PAGES.findall(text)}
    return pages["used"] - pages["cached"]


def test_events_leave_as_they_are_made(server):
    body = {
        "model": "gemma3:270m",
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": 40,
        "temperature": 0,
        "logit_bias": NO_EOG,
        "stream": True,
    }
    arrivals = []
    with httpx.stream(
        "POST", server.url("/v1/chat/completions"), json=body, timeout=60
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content":"' in line and '"content":""' not in line:
                arrivals.append(time.perf_counter())
    assert len(arrivals) >= 30
    span = arrivals[-1] - arrivals[0]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # One lump at the end would arrive within a few milliseconds, or in a few bursts.
    assert span > 0.2, span
    assert max(gaps) < 0.5 * span, (max(gaps), span)
    assert sum(gap > 0.002 for gap in gaps) >= len(gaps) // 2


def test_a_client_that_goes_away_frees_its_pages(server):
    httpx.post(  # load the model, so that the baseline is a loaded model's
        server.url("/v1/completions"),
        json={"model": "gemma3:270m", "prompt": "hi", "max_tokens": 1},
        timeout=120,
    )
    baseline = held_pages(server)
    body = {
        "model": "gemma3:270m",
        "prompt": "Once upon a time " * 40,
        "max_tokens": 900,
        "logit_bias": NO_EOG,
        "stream": True,
    }
    with httpx.stream("POST", server.url("/v1/completions"), json=body, timeout=60) as response:
        lines = response.iter_lines()
        for _ in range(5):
            next(lines)
        during = held_pages(server)
    assert during > baseline
    deadline = time.monotonic() + 5
    while held_pages(server) != baseline:
        assert time.monotonic() < deadline, f"pages held: {held_pages(server)}, baseline {baseline}"
        time.sleep(0.05)
