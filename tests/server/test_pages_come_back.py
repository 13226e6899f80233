"""Whatever clients send and however their requests end (a 400 for a malformed body, the
documented 503 "busy", a client that hangs up before its answer or in the middle of a stream),
every sequence's KV pages come back to the pool or the prefix cache, and the server keeps no
context that no client was told of.

Eight clients at once send a few hundred bodies, malformed and valid, to every generating route
of a server whose KV cache is small (`--ctx-size 256`: 32 pages), then delete the contexts they
were given; the server must then hold no context, and no page but the prefix cache's.
"""

from __future__ import annotations

import json
import random
import re
import socket
import threading
import time

import httpx
import pytest

from helpers.serving import Server

pytestmark = pytest.mark.slow

CLIENTS = 8
REQUESTS = 25  # per client
USER = [{"role": "user", "content": "Tell me about cats."}]
# A context id or stored response id in an answer, whole or streamed.
_ID = re.compile(rb'"id": ?"((?:ctx|resp)[-_][0-9a-f]+)"')
# How a client hangs up: never (None), after so many bytes of the answer, or when its timeout
# runs out (seconds) before the answer. One that asks the server to keep something gives up
# long before the server can have answered (a long prompt to compute, or a generation), or
# never: a give-up while the answer is on its way cannot be told from an answer received.
_HANG_UPS = {
    "generating": [None, None, 1, 300, 0.05, 0.5],
    "/llamay/v1/contexts": [None, None, 0.02],
    "stored": [None, None, 0.02],
    "fork": [None],
}
# What a malformed body puts in place of a field.
_WRONG = [None, "", -1, 10**9, 1.5, [], {}, "x" * 3000, [{"role": "user"}], {"a": [1, {}]}]


@pytest.fixture(scope="module")
def small(launch, tmp_path_factory) -> Server:
    return launch(tmp_path_factory.mktemp("small-cache-home"), "--ctx-size", "256")


def _bodies(model: str) -> dict[str, dict]:
    """A valid body for each generating route, and for making a context or a stored response
    (what a client is given an id of)."""
    return {
        "/v1/chat/completions": {"model": model, "messages": USER, "max_tokens": 8},
        "/v1/completions": {"model": model, "prompt": "Once upon a time", "max_tokens": 8},
        "/v1/messages": {"model": model, "messages": USER, "max_tokens": 8},
        "/api/generate": {"model": model, "prompt": "Hi", "options": {"num_predict": 8}},
        "/api/chat": {"model": model, "messages": USER, "options": {"num_predict": 8}},
        "/v1/responses": {"model": model, "input": "Hi", "max_output_tokens": 8, "store": False},
        "stored": {"model": model, "input": "Hi", "max_output_tokens": 8},
        "/llamay/v1/contexts": {"model": model, "prompt": "Cats are " * 40},
    }


def _send(server: Server, path: str, body: bytes, hang_up: int | float | None) -> bytes:
    """POST `body`; the whole answer, or what came of it before the client hung up: after
    `hang_up` bytes (an int), or when no byte came for `hang_up` seconds (a float: a client's
    timeout, which gives up while the server works on the request)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    patience = hang_up if isinstance(hang_up, float) else 300
    with socket.create_connection((host, int(port)), timeout=patience) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        answer = b""
        while not isinstance(hang_up, int) or len(answer) < hang_up:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            answer += chunk
    return answer


def _client(server: Server, seed: int, told: set[str], lock: threading.Lock) -> None:
    """One client's requests; the ids of the contexts and stored responses it was given go
    into `told`. It hangs up on some (_HANG_UPS)."""
    rng = random.Random(seed)
    bodies = _bodies(server.model)
    for _ in range(REQUESTS):
        kind = rng.choice([*bodies, "fork"])
        keeps = kind in ("stored", "fork", "/llamay/v1/contexts")
        path = "/v1/responses" if kind == "stored" else kind
        if kind == "fork":
            with lock:
                mine = sorted(i for i in told if i.startswith("ctx-"))
            if not mine:
                continue
            path, body = f"/llamay/v1/contexts/{rng.choice(mine)}/fork", {}
        else:
            body = dict(bodies[kind])
            if not keeps:
                body["stream"] = rng.random() < 0.5
            if rng.random() < 0.1 and "completions" in path:
                body["n"] = 8  # more sequences than the cache holds: 503 busy
            fields = sorted({*body, "messages", "prompt", "tools", "stop"} - {"store"})
            for _ in range(rng.choice([0, 0, 1, 2])):  # malformed: a field wrong or missing
                body[rng.choice(fields)] = rng.choice(_WRONG)
        data = json.dumps(body).encode() if rng.random() > 0.05 else b'{"model": '
        hang_up = rng.choice(_HANG_UPS.get(kind, _HANG_UPS["generating"]))
        if keeps and body != bodies.get(kind, body):
            hang_up = None  # changed, it may be answered at once: no give-up races it
        answer = _send(server, path, data, hang_up)
        with lock:
            told.update(found.decode() for found in _ID.findall(answer))


def test_after_any_requests_only_the_prefix_cache_holds_pages(small):
    told: set[str] = set()
    lock = threading.Lock()
    clients = [
        threading.Thread(target=_client, args=(small, seed, told, lock)) for seed in range(CLIENTS)
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    # What the clients were given is theirs: they delete it (once nothing runs in it).
    gone = {204, 404}
    deadline = time.monotonic() + 120
    while told:
        for given in sorted(told):
            route = "/v1/responses/" if given.startswith("resp_") else "/llamay/v1/contexts/"
            if httpx.delete(small.url(route + given), timeout=60).status_code in gone:
                told.discard(given)
        assert time.monotonic() < deadline, f"still busy: {sorted(told)}"
    while True:
        kv = httpx.get(small.url("/llamay/v1/stats"), timeout=60).json()["models"][small.model]
        held = {"contexts": kv["contexts"], "pages": kv["pages_used"] - kv["pages_cached"]}
        if held == {"contexts": 0, "pages": 0}:
            break
        listed = httpx.get(small.url("/llamay/v1/contexts"), timeout=60).json()["contexts"]
        assert time.monotonic() < deadline, f"held: {held}; {listed}"
        time.sleep(0.5)
