"""Streams leave the server as they are made, and a client that goes away frees its pages."""

from __future__ import annotations

import re

import httpx

from helpers.waiting import wait_until

# Gemma's end-of-generation tokens (<eos>, <end_of_turn>), banned so that a stream runs to
# max_tokens whatever the model would say.
NO_EOG = {"1": -100, "106": -100}
PAGES = re.compile(r'^llamay_kv_pages\{model="gemma3:270m",state="(\w+)"\} (\d+)$', re.M)
GENERATED = re.compile(r'^llamay_generated_tokens_total\{model="gemma3:270m"\} (\d+)$', re.M)
# Far more tokens than a test reads: the generation runs on while the test looks at it.
MANY = 900


def held_pages(server) -> int:
    """KV pages held by sequences (used, less those only the prefix cache keeps)."""
    text = httpx.get(server.url("/metrics")).text
    pages = {state: int(n) for state, n in PAGES.findall(text)}
    return pages["used"] - pages["cached"]


def load(server) -> None:
    """Loads the model, so that a baseline taken next is a loaded model's."""
    httpx.post(
        server.url("/v1/completions"),
        json={"model": server.model, "prompt": "hi", "max_tokens": 1},
        timeout=120,
    )


def generated_tokens(server) -> int:
    """Tokens generated so far, as the server counts them: a request's, once it has made them
    all."""
    found = GENERATED.search(httpx.get(server.url("/metrics")).text)
    return int(found.group(1)) if found else 0


def test_events_leave_as_they_are_made(server):
    """The first token's event reaches the client while the generation still runs: it holds
    its pages and has not counted its tokens. Sent in one lump at the end, it would arrive
    after both."""
    load(server)
    baseline, before = held_pages(server), generated_tokens(server)
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": MANY,
        "temperature": 0,
        "logit_bias": NO_EOG,
        "stream": True,
    }
    contents = []
    with httpx.stream(
        "POST", server.url("/v1/chat/completions"), json=body, timeout=60
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content":"' in line and '"content":""' not in line:
                if not contents:
                    pages_at_first, generated_at_first = (
                        held_pages(server),
                        generated_tokens(server),
                    )
                contents.append(line)
                if len(contents) == 30:
                    break
    assert len(contents) == 30  # the answer comes in many events, not one
    assert pages_at_first > baseline
    assert generated_at_first - before < MANY


def test_a_client_that_goes_away_frees_its_pages(server):
    load(server)
    baseline = held_pages(server)
    body = {
        "model": "gemma3:270m",
        "prompt": "Once upon a time " * 40,
        "max_tokens": MANY,
        "logit_bias": NO_EOG,
        "stream": True,
    }
    with httpx.stream("POST", server.url("/v1/completions"), json=body, timeout=60) as response:
        lines = response.iter_lines()
        for _ in range(5):
            next(lines)
        during = held_pages(server)
    assert during > baseline
    wait_until(lambda: held_pages(server) == baseline, 60, "the stream's pages were not freed")
