"""Hostile values in every field of every JSON route, against a real `llamay serve`: never a 5xx.

Schemathesis (test_schemathesis.py) makes requests from the schemas; this takes a request each
route answers and puts into one of its fields (or a new one) a value of the classes that once
made 5xx: non-finite and huge numbers, huge and deeply nested values, odd Unicode (lone
surrogates, NUL, bidirectional marks), long names, paths and URLs. The JSON is written by hand
where Python's would refuse it (NaN, a lone surrogate). Bounded for CI;
`LLAMAY_HTTP_FUZZ_EXAMPLES` (`tox -e fuzz`) runs more.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

EXAMPLES = 25 * int(os.environ.get("LLAMAY_HTTP_FUZZ_EXAMPLES", "4"))
MODEL = "gemma3:270m"
HI = [{"role": "user", "content": "Hi"}]

# A request each route answers, with the fields a mutation may replace (dotted paths).
ROUTES = {
    ("POST", "/v1/chat/completions"): {"model": MODEL, "messages": HI, "max_tokens": 2},
    ("POST", "/v1/completions"): {"model": MODEL, "prompt": "Hi", "max_tokens": 2},
    ("POST", "/v1/embeddings"): {"model": MODEL, "input": "Hi"},
    ("POST", "/v1/messages"): {"model": MODEL, "messages": HI, "max_tokens": 2},
    ("POST", "/v1/messages/count_tokens"): {"model": MODEL, "messages": HI},
    ("POST", "/api/generate"): {
        "model": MODEL,
        "prompt": "Hi",
        "stream": False,
        "options": {"num_predict": 2, "temperature": 0.5},
        "keep_alive": "5m",
    },
    ("POST", "/api/chat"): {
        "model": MODEL,
        "messages": HI,
        "stream": False,
        "options": {"num_predict": 2},
    },
    ("POST", "/api/embed"): {"model": MODEL, "input": "Hi"},
    ("POST", "/api/embeddings"): {"model": MODEL, "prompt": "Hi"},
    ("POST", "/api/show"): {"model": MODEL},
    ("POST", "/api/pull"): {"model": "http://127.0.0.1:9/fuzz.gguf", "stream": False},
    ("POST", "/api/create"): {"model": "fuzz:1", "from": MODEL, "stream": False},
    ("POST", "/api/copy"): {"source": MODEL, "destination": "fuzz:2"},
    ("DELETE", "/api/delete"): {"model": "fuzz:none"},
    ("POST", "/llamay/v1/contexts"): {"model": MODEL, "prompt": "Hi"},
    ("POST", "/llamay/v1/contexts/{id}/generate"): {"max_tokens": 2, "temperature": 0},
    ("POST", "/completion"): {
        "model": MODEL,
        "prompt": "Hi",
        "n_predict": 2,
        "seed": 1,
        "n_probs": 1,
        "logit_bias": [[1, -1]],
        "stop": ["x"],
        "id_slot": -1,
        "n_indent": 2,
        "t_max_predict_ms": 1000,
        "response_fields": ["content"],
    },
    # Gemma has no FIM tokens: a 400, whatever the fields hold
    ("POST", "/infill"): {
        "model": MODEL,
        "input_prefix": "a",
        "input_suffix": "b",
        "input_extra": [{"filename": "f", "text": "t"}],
        "prompt": "c",
        "n_predict": 2,
    },
    ("POST", "/tokenize"): {"model": MODEL, "content": "Hi", "with_pieces": True},
    ("POST", "/detokenize"): {"model": MODEL, "tokens": [1, 2]},
    ("POST", "/apply-template"): {"model": MODEL, "messages": HI},
}


def fields(body, prefix=""):
    """The dotted paths of every value in a request body."""
    for key, value in body.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, dict):
            yield from fields(value, path + ".")


# Hostile values as JSON text (so that NaN and lone surrogates can be written).
HOSTILE = [
    "NaN",
    "-Infinity",
    "1e400",
    "-1e400",
    "1" + "0" * 400,
    "-1" + "0" * 400,
    "1e-400",
    "0",
    "-1",
    "0.5",
    "true",
    "null",
    "[]",
    "{}",
    '"\\udc80"',
    '"\\ud800x"',
    '"\\u0000"',
    '"\\u202e\\u2066evil\\u2069"',
    '"' + "\\u0301" * 1000 + '"',
    '"' + "a" * 300 + ':latest"',
    '"' + "x/" * 150 + 'y"',
    '"/etc/passwd"',
    '"../../../../etc/shadow.gguf"',
    '"~root/.ssh/id_rsa.gguf"',
    '"http://127.0.0.1:9/' + "m" * 300 + '.gguf"',
    '"' + "{{" * 20000 + '"',
    '"' + "word " * 200_000 + '"',
    "[" * 200 + "]" * 200,
    '{"a": ' * 50 + "1" + "}" * 50,
    "[" + ",".join(["1"] * 50_000) + "]",
    '{"type": "object", "properties": ' + '{"a": {"type": "object", "properties": ' * 20 + "{}" + "}}" * 20 + "}",
]  # fmt: skip


def with_value(body: dict, path: str, value_text: str) -> str:
    """`body` as JSON text with the value at dotted `path` replaced by `value_text`."""
    marker = "\u0000MARK\u0000"
    copy = json.loads(json.dumps(body))
    *parents, last = path.split(".")
    node = copy
    for part in parents:
        node = node[part]
    node[last] = marker
    return json.dumps(copy).replace(json.dumps(marker), value_text)


@pytest.fixture(scope="module")
def context_id(server):
    made = httpx.post(
        server.url("/llamay/v1/contexts"), json={"model": MODEL, "prompt": "Fuzz"}, timeout=120
    )
    assert made.status_code == 201
    yield made.json()["id"]


ROUTE_KEYS = sorted(ROUTES)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_no_hostile_value_in_any_field_is_a_server_error(server, context_id, data):
    method, path = data.draw(st.sampled_from(ROUTE_KEYS), label="route")
    body = ROUTES[(method, path)]
    field = data.draw(st.sampled_from([*fields(body), "llamay_unknown"]), label="field")
    value = data.draw(st.sampled_from(HOSTILE), label="value")
    text = with_value({**body, "llamay_unknown": None}, field, value)
    if field != "llamay_unknown":
        text = text.replace(', "llamay_unknown": null', "")
    answer = httpx.request(
        method,
        server.url(path.replace("{id}", context_id)),
        content=text.encode("utf-8", "surrogatepass"),
        headers={"Content-Type": "application/json"},
        timeout=300,
    )
    assert answer.status_code < 500, f"{method} {path} {field}={value[:80]} -> {answer.text[:300]}"
    if path == "/llamay/v1/contexts" and answer.status_code == 201:
        httpx.delete(server.url(f"/llamay/v1/contexts/{answer.json()['id']}"))


def test_the_server_is_well_after_the_fuzzing(server):
    assert httpx.get(server.url("/health"), timeout=30).json() == {"status": "ok"}
    for name in ("fuzz:1", "fuzz:2"):
        httpx.request("DELETE", server.url("/api/delete"), json={"model": name}, timeout=60)
