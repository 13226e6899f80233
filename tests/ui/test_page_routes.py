"""The chat page's routes and files, in-process (falcon's test client; no model, no browser):
who gets the page at `/`, the headers it is served with, that it needs no API key while the
API does, and what its files may and may not contain."""

from __future__ import annotations

import re
from importlib import resources

import falcon.testing
import pytest

from llamay.server import create_app, openapi, ui
from llamay.server.config import ServerConfig

KEY = "page-test-key"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
# the test client's own Host would be refused (without a key, llamay answers its own address)
LOOPBACK = {"Host": "127.0.0.1:11435"}
FILES = resources.files("llamay.server") / "webui"
TESTIDS = [
    "model-select",
    "message-input",
    "send",
    "stop",
    "message",
    "regenerate",
    "edit",
    "branch-prev",
    "branch-next",
    "branch-label",
    "snapshot-download",
    "snapshot-open",
    "replay",
    "replay-result",
    "settings",
    "api-key",
]


@pytest.fixture(scope="module")
def client():
    return falcon.testing.TestClient(create_app(ServerConfig()), headers=LOOPBACK)


@pytest.fixture(scope="module")
def keyed():
    return falcon.testing.TestClient(create_app(ServerConfig(api_key=KEY)), headers=LOOPBACK)


def page_text(name: str) -> str:
    return (FILES / name).read_text(encoding="utf-8")


def scripts() -> dict[str, str]:
    return {item.name: item.read_text() for item in FILES.iterdir() if item.name.endswith(".js")}


@pytest.mark.parametrize(
    ("accept", "page"),
    [
        (BROWSER, True),  # Chromium's, Firefox's and Safari's navigation headers rank HTML first
        ("text/html", True),
        ("text/html;q=0.9, text/plain;q=0.5", True),
        (None, False),  # curl, the ollama client
        ("*/*", False),
        ("application/json", False),
        ("text/plain, text/html", False),  # a tie keeps Ollama's answer
        ("text/*, text/html;q=0.5", False),
        ("text/html;q=0", False),
        ("text/html;q=abc, text/plain", False),
        ("text/html;q=nan, */*;q=0.1", False),
    ],
)
def test_root_is_the_page_only_for_a_request_that_prefers_html(client, accept, page):
    headers = {"Accept": accept} if accept is not None else {}
    answer = client.simulate_get("/", headers=headers)
    assert answer.status_code == 200
    assert answer.headers["vary"] == "Accept"
    if page:
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert answer.text == page_text("index.html")
    else:
        assert answer.headers["content-type"].startswith("text/plain")
        assert answer.text == "Ollama is running"
    head = client.simulate_head("/", headers=headers)
    assert head.headers["content-type"].startswith("text/html" if page else "text/plain")


def test_the_page_and_its_files_are_served_under_a_strict_policy(client):
    answer = client.simulate_get("/ui")
    assert answer.status_code == 200
    assert answer.text == page_text("index.html")
    assert answer.headers["content-security-policy"] == (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    for item in FILES.iterdir():
        if item.name == "index.html" or item.name.endswith(".txt"):
            continue
        served = client.simulate_get(f"/ui/{item.name}")
        assert served.status_code == 200, item.name
        assert served.content == item.read_bytes()
        assert served.headers["content-type"].startswith(types[item.name[item.name.rfind(".") :]])
        assert "content-security-policy" in served.headers
        again = client.simulate_get(
            f"/ui/{item.name}", headers={"If-None-Match": served.headers["etag"]}
        )
        assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize("name", ["nothing.js", "..", "%2e%2e%2fapp.py", "app.js%00", "ui.py"])
def test_only_the_page_files_are_served(client, name):
    answer = client.simulate_get(f"/ui/{name}")
    assert answer.status_code == 404
    assert answer.json["error"]["type"] == "not_found_error"


def test_with_an_api_key_the_page_needs_none_and_everything_else_does(keyed):
    assert keyed.simulate_get("/ui").status_code == 200
    assert keyed.simulate_get("/ui/app.js").status_code == 200
    assert keyed.simulate_get("/", headers={"Accept": BROWSER}).status_code == 200
    assert keyed.simulate_get("/", headers={"Accept": "*/*"}).status_code == 401
    assert keyed.simulate_get("/v1/models").status_code == 401
    assert keyed.simulate_get("/llamay/v1/contexts").status_code == 401
    assert keyed.simulate_post("/ui").status_code in (401, 405)
    bearer = {"Authorization": f"Bearer {KEY}"}
    assert keyed.simulate_get("/v1/models", headers=bearer).status_code == 200
    assert keyed.simulate_get("/", headers={"Accept": "*/*", **bearer}).text == "Ollama is running"


def test_the_routes_are_in_the_openapi_document(client):
    document = openapi.document(client.app)
    assert document["paths"]["/ui"]["get"]["tags"] == ["ui"]
    assert "text/html" in document["paths"]["/ui"]["get"]["responses"]["200"]["content"]
    root = document["paths"]["/"]["get"]["responses"]["200"]["content"]
    assert set(root) == {"text/plain", "text/html"}
    assert "/ui/{name}" in document["paths"]


def test_every_file_the_page_loads_is_shipped():
    html = page_text("index.html")
    shipped = {item.name for item in FILES.iterdir()}
    referenced = set(re.findall(r'(?:src|href)="/ui/([^"]+)"', html))
    for source in scripts().values():
        referenced |= set(re.findall(r'from "\./([^"]+)"', source))
    assert referenced and referenced <= shipped


def test_no_script_or_style_is_inline_and_no_markup_is_parsed():
    """What the policy forbids is not there to forbid, and no script builds elements from
    strings: text reaches the page as text nodes only (markdown.js)."""
    html = page_text("index.html")
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert "<style" not in html and " style=" not in html and re.search(r" on\w+=", html) is None
    for name, source in scripts().items():
        for risky in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "DOMParser",
            "createContextualFragment",
            'setAttribute("style',
        ):
            assert risky not in source, (name, risky)
    # nothing from elsewhere: no CDN, no web font
    css = page_text("style.css")
    assert "://" not in html and "://" not in css
    assert "@font-face" not in css and "@import" not in css and "url(" not in css


def test_the_page_carries_every_testid_the_contract_names():
    sources = page_text("index.html") + "".join(scripts().values())
    for testid in TESTIDS:
        found = f'data-testid="{testid}"' in sources or re.search(
            rf'testid = "{testid}"|"{testid}"', sources
        )
        assert found, testid


def test_is_public_is_only_the_page():
    def request(method: str, path: str, accept: str = "*/*") -> falcon.Request:
        return falcon.testing.create_req(method=method, path=path, headers={"Accept": accept})

    assert ui.is_public(request("GET", "/ui"))
    assert ui.is_public(request("GET", "/ui/style.css"))
    assert ui.is_public(request("GET", "/", BROWSER))
    assert not ui.is_public(request("GET", "/"))
    assert not ui.is_public(request("POST", "/ui"))
    assert not ui.is_public(request("GET", "/uix"))
    assert not ui.is_public(request("GET", "/v1/models", BROWSER))
