"""Prometheus metrics: the exposition text of Metrics, and GET /metrics of a real server."""

from __future__ import annotations

import re

import httpx
import pytest

from llamay.server.metrics import Metrics

# name{label="value",...} value, where a value may hold any character, escaped ones included.
SAMPLE = re.compile(r'^([a-z_]+)(\{(?:[a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def samples(text: str) -> dict[str, float]:
    """'name{labels}' -> value, for every sample line; every other line is a HELP or TYPE."""
    found = {}
    for line in text.splitlines():
        if line.startswith("# "):
            assert line.startswith(("# HELP ", "# TYPE ")), line
            continue
        match = SAMPLE.match(line)
        assert match, line
        found[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return found


def test_the_exposition_text_counts_requests_latencies_tokens_and_pages():
    metrics = Metrics()
    metrics.request("/v1/chat/completions", 200, 0.3, "POST")
    metrics.request("/v1/chat/completions", 200, 7.0, "POST")
    metrics.request("/v1/chat/completions", 400, 0.001, "POST")
    metrics.tokens("gemma3:270m", 12, 30)
    metrics.tokens("gemma3:270m", 3, 0)
    stats = {"gemma3:270m": {"pages_used": 5, "pages_free": 123, "pages_cached": 2}}
    text = metrics.render(stats)
    found = samples(text)
    route = 'method="POST",route="/v1/chat/completions"'
    assert found[f'llamay_requests_total{{{route},status="200"}}'] == 2
    assert found[f'llamay_requests_total{{{route},status="400"}}'] == 1
    assert found[f'llamay_request_seconds_bucket{{{route},le="0.005"}}'] == 1
    assert found[f'llamay_request_seconds_bucket{{{route},le="0.25"}}'] == 1
    assert found[f'llamay_request_seconds_bucket{{{route},le="0.5"}}'] == 2
    assert found[f'llamay_request_seconds_bucket{{{route},le="5"}}'] == 2
    assert found[f'llamay_request_seconds_bucket{{{route},le="10"}}'] == 3
    assert found[f'llamay_request_seconds_bucket{{{route},le="+Inf"}}'] == 3
    assert found[f"llamay_request_seconds_count{{{route}}}"] == 3
    assert found[f"llamay_request_seconds_sum{{{route}}}"] == pytest.approx(7.301)
    assert found['llamay_prompt_tokens_total{model="gemma3:270m"}'] == 15
    assert found['llamay_generated_tokens_total{model="gemma3:270m"}'] == 30
    assert found['llamay_kv_pages{model="gemma3:270m",state="used"}'] == 5
    assert found['llamay_kv_pages{model="gemma3:270m",state="free"}'] == 123
    assert found['llamay_kv_pages{model="gemma3:270m",state="cached"}'] == 2
    for name, kind in (
        ("llamay_requests_total", "counter"),
        ("llamay_request_seconds", "histogram"),
        ("llamay_prompt_tokens_total", "counter"),
        ("llamay_generated_tokens_total", "counter"),
        ("llamay_kv_pages", "gauge"),
    ):
        assert f"# TYPE {name} {kind}\n" in text
    assert text.endswith("\n")


def test_label_values_are_escaped():
    metrics = Metrics()
    metrics.tokens('we"ird\\name\n', 1, 1)
    assert 'model="we\\"ird\\\\name\\n"' in metrics.render({})


def test_the_server_counts_what_it_answers(server):
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=120) as api:
        api.post("/api/generate", json={"model": server.model})  # loaded
        before = samples(api.get("/metrics").text)
        assert api.get("/health").status_code == 200
        assert api.get("/no/such/path/123").status_code == 404
        context = api.post("/llamay/v1/contexts", json={"model": server.model, "prompt": "Hi"})
        n_prompt = context.json()["n_tokens"]
        url = f"/llamay/v1/contexts/{context.json()['id']}"
        generated = api.post(f"{url}/generate", json={"max_tokens": 4, "temperature": 0})
        assert len(generated.json()["tokens"]) == 4
        stats = api.get("/llamay/v1/stats").json()["models"][server.model]
        answer = api.get("/metrics")
        assert api.delete(url).status_code == 204
    assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    after = samples(answer.text)

    def grew(key: str) -> float:
        return after.get(key, 0) - before.get(key, 0)

    assert grew('llamay_requests_total{method="GET",route="/health",status="200"}') == 1
    assert grew('llamay_request_seconds_count{method="GET",route="/health"}') == 1
    assert grew('llamay_requests_total{method="GET",route="unmatched",status="404"}') == 1
    generate_route = 'method="POST",route="/llamay/v1/contexts/{context_id}/generate"'
    assert grew(f'llamay_requests_total{{{generate_route},status="200"}}') == 1
    model = f'model="{server.model}"'
    # The context's prompt, then the generation (which evaluates no new prompt tokens).
    assert grew(f"llamay_prompt_tokens_total{{{model}}}") == n_prompt
    assert grew(f"llamay_generated_tokens_total{{{model}}}") == 4
    assert after[f'llamay_kv_pages{{{model},state="used"}}'] == stats["pages_used"]
    assert after[f'llamay_kv_pages{{{model},state="free"}}'] == stats["pages_free"]
    assert after[f'llamay_kv_pages{{{model},state="cached"}}'] == stats["pages_cached"]
