"""A web page the user visits must not be able to drive a server on loopback (docs/security.md):
not by a cross-site request (a form or `fetch(..., {mode: "no-cors"})`, which a browser sends
with the page's Origin and a text/plain or form body), and not by DNS rebinding (a name of the
attacker's that resolves to 127.0.0.1, which makes the page same-origin: its requests carry
`Host: evil.example`). Browser apps that are meant to use the server are listed with
--allow-origin and get correct CORS answers.
"""

from __future__ import annotations

import httpx
import pytest

from helpers.clitools import run_llamay

EVIL = "http://evil.example"
APP = "https://app.example"


def test_a_rebinding_host_is_refused_without_a_key(server):
    port = server.base_url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example"):
        refused = httpx.get(server.url("/api/tags"), headers={"Host": host})
        assert refused.status_code == 403, host
        assert "is not this server's address" in refused.json()["error"]
        assert "models" not in refused.json()
    for host in (
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"[::1]:{port}",
        "localhost",
        "LOCALHOST",
    ):
        assert httpx.get(server.url("/api/tags"), headers={"Host": host}).status_code == 200, host


def test_with_a_key_the_host_is_not_checked(keyed_server):
    headers = {"Host": "llm.example.com", **keyed_server.headers()}
    assert httpx.get(keyed_server.url("/health"), headers=headers).status_code == 200
    assert httpx.get(keyed_server.url("/health"), headers={"Host": "x.example"}).status_code == 401


def test_a_foreign_page_cannot_copy_or_pull_models(server):
    """The page's request as a browser sends it: its Origin, a text/plain body (no preflight)."""
    body = '{"source": "gemma3:270m", "destination": "pwned:1"}'
    foreign = httpx.post(
        server.url("/api/copy"),
        content=body,
        headers={"Origin": EVIL, "Content-Type": "text/plain;charset=UTF-8"},
    )
    assert foreign.status_code == 403
    assert "may not change anything" in foreign.json()["error"]
    # Even without an Origin (an old browser, a plugin), the body is not read as JSON.
    untyped = httpx.post(
        server.url("/api/copy"), content=body, headers={"Content-Type": "text/plain"}
    )
    assert untyped.status_code == 415
    names = [m["name"] for m in httpx.get(server.url("/api/tags")).json()["models"]]
    assert "pwned:1" not in names
    # Reads from a foreign page are answered without CORS headers: the browser keeps the
    # answer from the page.
    read = httpx.get(server.url("/api/tags"), headers={"Origin": EVIL})
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
    preflight = httpx.options(
        server.url("/api/copy"),
        headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 403


def test_the_servers_own_origin_is_not_foreign(server):
    port = server.base_url.rsplit(":", 1)[1]
    same = httpx.post(
        server.url("/api/show"),
        json={"model": server.model},
        headers={"Origin": f"http://127.0.0.1:{port}"},
    )
    assert same.status_code == 200


@pytest.fixture(scope="module")
def app_server(launch, tmp_path_factory):
    return launch(tmp_path_factory.mktemp("cors-home"), "--allow-origin", APP)


def test_an_allowed_origin_gets_cors_answers(app_server):
    preflight = httpx.options(
        app_server.url("/v1/chat/completions"),
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == APP
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["access-control-allow-headers"] == (
        "authorization, content-type, x-stainless-os"
    )
    assert "Origin" in preflight.headers["vary"]
    answer = httpx.post(
        app_server.url("/api/show"), json={"model": app_server.model}, headers={"Origin": APP}
    )
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == APP
    assert "Origin" in answer.headers["vary"]
    other = httpx.post(
        app_server.url("/api/show"), json={"model": app_server.model}, headers={"Origin": EVIL}
    )
    assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


def test_a_bad_allow_origin_is_a_usage_error():
    result = run_llamay("serve", "--allow-origin", "app.example", "--port", "0", timeout=60)
    assert result.returncode == 2
    assert "not an origin" in result.stderr
