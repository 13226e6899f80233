"""The chat page: `GET /ui`, its files under `/ui/`, and `GET /` for a browser.

The page is plain files shipped in the package (llamay/server/webui: HTML, CSS and ES modules,
nothing fetched from elsewhere), served under a Content-Security-Policy that lets them load
only themselves and talk only to this server: no inline script or style, no other origin, no
frames. `GET /` stays Ollama's "Ollama is running" (ollama.py) unless the request ranks
text/html above text/plain, as a browser's address bar does.

The page holds no secret, so it and its files are served without the API key (`is_public`):
the page asks the user for the key and sends it with every call it makes.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import falcon

from llamay.server import openapi
from llamay.server.state import ServerState

_FOLDER = "webui"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
_PAGE = "index.html"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    # a new llamay's page is fetched again, not taken from the cache
    "Cache-Control": "no-cache",
}


class _File:
    def __init__(self, name: str, body: bytes) -> None:
        self.body = body
        self.content_type = _TYPES[name[name.rfind(".") :]]
        self.etag = hashlib.sha256(body).hexdigest()[:32]


def _load() -> dict[str, _File]:
    """Every file of the page, by name, read once."""
    folder = resources.files("llamay.server") / _FOLDER
    files = {}
    for item in folder.iterdir():
        suffix = item.name[item.name.rfind(".") :]
        if item.is_file() and suffix in _TYPES:
            files[item.name] = _File(item.name, item.read_bytes())
    return files


_FILES = _load()


def add_routes(app: falcon.App, state: ServerState) -> None:
    app.add_route("/ui", _Page())
    app.add_route("/ui/{name}", _Asset())
    html = {"type": "string"}
    openapi.describe(
        "GET", "/ui", "The chat page", tag="ui", response=html, response_type="text/html"
    )
    openapi.describe(
        "GET",
        "/ui/{name}",
        "A file of the chat page (script, style sheet, icon)",
        tag="ui",
        path_params={"name": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+\.[a-z]+$"}},
        response=html,
        response_type="text/javascript",
        errors={404: "no such file"},
    )


def prefers_page(req: falcon.Request) -> bool:
    """Whether the request's Accept header ranks text/html above text/plain (each by its most
    specific match: `text/html`, then `text/*`, then `*/*`); a tie keeps the plain answer."""
    accept = req.get_header("Accept") or ""
    return _quality(accept, "text/html") > _quality(accept, "text/plain")


def is_public(req: falcon.Request) -> bool:
    """Whether the request is for the page or its files, which need no API key."""
    if req.method not in ("GET", "HEAD"):
        return False
    path = req.path
    return path == "/ui" or path.startswith("/ui/") or (path == "/" and prefers_page(req))


def send_page(req: falcon.Request, resp: falcon.Response) -> None:
    """Answers with the page."""
    _send(req, resp, _FILES[_PAGE])


class _Page:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send_page(req, resp)


class _Asset:
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        found = _FILES.get(name)
        if found is None:
            raise falcon.HTTPNotFound(description=f"the chat page has no file {name[:100]!r}")
        _send(req, resp, found)


def _send(req: falcon.Request, resp: falcon.Response, found: _File) -> None:
    for header, value in _HEADERS.items():
        resp.set_header(header, value)
    resp.etag = found.etag
    if found.etag in (req.if_none_match or ()):
        resp.status = falcon.HTTP_304
        resp.content_type = None  # a 304 has no body
        return
    resp.content_type = found.content_type
    resp.data = found.body


def _quality(accept: str, media_type: str) -> float:
    """The q an Accept header gives `media_type` through its most specific matching range."""
    kind = media_type.split("/")[0]
    ranks = {media_type: 2, f"{kind}/*": 1, "*/*": 0}
    best_rank, best_q = -1, 0.0
    for part in accept.split(","):
        media_range, *parameters = (field.strip() for field in part.split(";"))
        rank = ranks.get(media_range.lower(), -1)
        if rank < 0 or rank < best_rank:
            continue
        q = _q(parameters)
        best_q = q if rank > best_rank else max(q, best_q)
        best_rank = rank
    return best_q


def _q(parameters: list[str]) -> float:
    """A media range's q (1 without one); anything but a number from 0 to 1 counts as 0."""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value)
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0
    return 1.0
