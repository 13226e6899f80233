"""Who may call the server: the Host and Origin checks, CORS for allowed origins, the API key.

A web page the user visits can send requests to a server on loopback: a form or `fetch` with
`mode: "no-cors"` reaches it from any origin (cross-site request forgery), and a name of the
attacker's that resolves to 127.0.0.1 makes the page same-origin with the server (DNS
rebinding). So, in this order (docs/security.md):

1. Without an API key, the Host header must name the server: the address it was told to listen
   on, `localhost`, `127.0.0.1` or `[::1]` (any port), or any IP address when it listens on all
   of them. A rebinding page's requests carry its own name and are refused (403). With a key the
   Host is not checked: the key is what a page cannot send.
2. A request whose Origin is another site's is refused (403) on routes that change anything
   (POST, PUT, PATCH, DELETE), unless that origin is allowed (`--allow-origin`); reads are
   answered, and without CORS headers the browser keeps the answer from the page.
3. CORS: a preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin is
   answered here, before the key check (browsers send no credentials on a preflight); other
   answers to an allowed origin carry Access-Control-Allow-Origin.
4. With an API key, every other request must carry it, but those the app names public (the
   chat page's files, which hold no secret: the page asks for the key).

JSON routes refuse a body sent as a form or text/plain (errors.read_json): the types a page may
send cross-origin without a preflight. A body without a Content-Type is read as JSON (clients
such as litellm send none); a browser sends such a body cross-origin only with its Origin, which
check 2 refuses.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import falcon

from llamay.server.errors import ApiError

CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
# what a page on an allowed origin may read: the session and replica headers route its next call
_EXPOSED = "Location, Retry-After, Content-Disposition, x-llamay-session, x-llamay-replica"
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
# Header names a preflight may ask for: tokens separated by commas (anything else is dropped).
_HEADER_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")
_PREFLIGHT_MAX_AGE = "600"


class Guard:
    """Falcon middleware: the checks 1-3 of the module docstring."""

    def __init__(self, host: str, has_key: bool, allowed_origins: Iterable[str]) -> None:
        self.check_host = not has_key
        self.host = _bare(host)
        self.any_address = self.host in _WILDCARDS
        self.any_origin = "*" in allowed_origins
        self.origins = {_origin(origin) for origin in allowed_origins if origin != "*"}

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.check_host:
            self._check_host(req)
        origin = req.get_header("Origin")
        if origin is None:
            return
        allowed = self._allowed(origin, req)
        if req.method == "OPTIONS" and req.get_header("Access-Control-Request-Method"):
            if not allowed:
                raise ApiError(403, f"origin {origin!r} may not call this server (--allow-origin)")
            _preflight(req, resp, origin)
            resp.complete = True
            return
        if req.method in CHANGING and not allowed:
            raise ApiError(
                403,
                f"a page from {origin!r} may not change anything on this server; start it with "
                f"--allow-origin {origin} if that site is meant to use it",
            )

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        origin = req.get_header("Origin")
        answered = resp.get_header("Access-Control-Allow-Origin") is not None  # a preflight
        if origin is not None and not answered and self._allowed(origin, req, same_origin=False):
            resp.set_header("Access-Control-Allow-Origin", origin)
            resp.set_header("Access-Control-Expose-Headers", _EXPOSED)
            resp.append_header("Vary", "Origin")

    def _check_host(self, req: falcon.Request) -> None:
        header = req.get_header("Host")
        if header is None:  # HTTP/1.0 without one: no browser sends that
            return
        host = _bare(header)
        if host in _LOOPBACK_NAMES or host == self.host or (self.any_address and _is_ip(host)):
            return
        raise ApiError(
            403,
            f"Host {header!r} is not this server's address: without an API key llamay answers "
            "only to its own address, localhost, 127.0.0.1 and [::1] (a page on another name "
            "could be rebinding it); give the server an --api-key to serve other names",
        )

    def _allowed(self, origin: str, req: falcon.Request, same_origin: bool = True) -> bool:
        """Whether a page of `origin` may use the server: listed, or (same_origin) the server's
        own origin."""
        if self.any_origin or _origin(origin) in self.origins:
            return True
        if not same_origin:
            return False
        netloc = urlsplit(origin).netloc.lower() if origin != "null" else None
        return netloc is not None and netloc == (req.get_header("Host") or "").lower()


class RequireKey:
    """With an API key configured, every request must carry it, as `Authorization: Bearer KEY`
    (OpenAI, Ollama clients) or `x-api-key: KEY` (Anthropic clients), but those `public` says
    need none."""

    def __init__(
        self, api_key: str | None, public: Callable[[falcon.Request], bool] = lambda req: False
    ) -> None:
        self.api_key = api_key.encode() if api_key else None
        self.public = public

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.api_key is None or self.public(req):
            return
        given = [req.get_header("x-api-key") or ""]
        authorization = req.get_header("Authorization") or ""
        if authorization[:7].lower() == "bearer ":
            given.append(authorization[7:].strip())
        if not any(hmac.compare_digest(_bytes(key), self.api_key) for key in given):
            raise ApiError(
                401,
                "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
            )


def _preflight(req: falcon.Request, resp: falcon.Response, origin: str) -> None:
    resp.status = falcon.HTTP_204
    resp.set_header("Access-Control-Allow-Origin", origin)
    resp.set_header("Access-Control-Allow-Methods", _METHODS)
    asked = (req.get_header("Access-Control-Request-Headers") or "").strip()
    if asked and _HEADER_LIST.fullmatch(asked):
        resp.set_header("Access-Control-Allow-Headers", asked)
    resp.set_header("Access-Control-Max-Age", _PREFLIGHT_MAX_AGE)
    resp.set_header("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")


def _bare(host: str) -> str:
    """A Host header's or address's host, lowercase, without port or IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:  # name:port or v4:port (a bare IPv6 address has more colons)
        return host.split(":")[0]
    return host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _origin(origin: str) -> str:
    """An origin as browsers send it: scheme://host[:port], lowercase, no trailing slash."""
    return origin.strip().rstrip("/").lower()


def _bytes(key: str) -> bytes:
    # Header values arrive as latin-1 text (WSGI): compare the bytes that were sent.
    return key.encode("latin-1", "replace")
