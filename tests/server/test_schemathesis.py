"""Schemathesis over /openapi.json against a real `llamay serve`: whatever a client sends, valid
by the schema or not, the answer is never a 5xx.

Bounded to about a minute: a few examples per operation, valid and invalid, generations cut to a
few tokens (`LLAMAY_HTTP_FUZZ_EXAMPLES` sets the count; `tox -e fuzz` runs more). Requests that
name a model name the real one, so that the generation paths run, except on the routes that
change the store: a copy of the built-in model, deleted, would take its shared blob with it.
/api/pull pulls from a loopback port that refuses connections, so that nothing leaves the
machine and the failure paths run.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("LLAMAY_HTTP_FUZZ_EXAMPLES", "4"))  # per operation and mode
NOWHERE = "http://127.0.0.1:9/fuzz.gguf"  # the discard port: nothing listens
STORE_ROUTES = ("/api/copy", "/api/delete", "/api/create", "/api/blobs/{digest}")
# Routes that generate, with their token limit fields.
TOKEN_LIMITS = {
    "/v1/chat/completions": ("max_tokens", "max_completion_tokens"),
    "/v1/completions": ("max_tokens",),
    "/v1/messages": ("max_tokens",),
    "/llamay/v1/contexts/{context_id}/generate": ("max_tokens",),
    "/v1/responses": ("max_output_tokens",),
    "/completion": ("n_predict",),
    "/infill": ("n_predict",),
}
OLLAMA_GENERATING = ("/api/generate", "/api/chat")


def bounded(case, model: str) -> None:
    """Name the real model and ask for at most a few tokens."""
    store_route = case.operation.path in STORE_ROUTES
    if isinstance(case.query, dict) and "model" in case.query and not store_route:
        case.query["model"] = model  # a snapshot upload
    body = case.body
    if not isinstance(body, dict):
        return
    path = case.operation.path
    if path == "/api/pull" and "model" in body:
        body["model"] = NOWHERE
    elif "model" in body and not store_route:
        body["model"] = model
    for limit in TOKEN_LIMITS.get(path, ()):
        body[limit] = 4
    if path in OLLAMA_GENERATING:
        options = body.get("options")
        body["options"] = {**options, "num_predict": 4} if isinstance(options, dict) else options
        if "options" not in body or body["options"] is None:
            body["options"] = {"num_predict": 4}


def test_no_request_gets_a_server_error(server):
    config = schemathesis.Config.from_dict({"request-timeout": 60})
    schema = schemathesis.openapi.from_url(
        server.url("/openapi.json"), config=config, headers=server.headers()
    )
    failures: list[str] = []
    sent = [0]
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def probe(case) -> None:
                bounded(case, server.model)
                sent[0] += 1
                answer = case.call(base_url=server.base_url, headers=server.headers(), timeout=60)
                if answer.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.path} {case.path_parameters} {case.query} "
                        f"{case.body!r:.300} -> {answer.status_code} {answer.text[:500]}"
                    )

            try:
                probe()
            except Unsatisfiable:  # nothing in this operation can be made invalid
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert failures == []
    assert sent[0] >= 100
