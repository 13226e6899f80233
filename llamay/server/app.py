"""`create_app(config)`: the WSGI app every API family lives in.

It runs under waitress (`llamay serve`) or any other WSGI server (docs/deploy.md). Here are the
parts every route shares: the API key check, the body limit, error rendering in the shape of the
request's family, metrics, and `GET /health`.
"""

from __future__ import annotations

import hmac
import json
import os

import falcon

from llamay.server import anthropic, metrics, native, ollama, openai, openapi
from llamay.server.config import ServerConfig
from llamay.server.errors import ApiError, error_body, family_of, from_exception
from llamay.server.models import ModelManager
from llamay.server.state import ServerState

FAMILIES = (openai, anthropic, ollama, native, metrics, openapi)


def create_app(config: ServerConfig | None = None) -> falcon.App:
    """The server's WSGI app. Without a config: the defaults, and the API key from
    $LLAMAY_API_KEY (as under gunicorn: `gunicorn 'llamay.server:create_app()'`)."""
    if config is None:
        config = ServerConfig(api_key=os.environ.get("LLAMAY_API_KEY") or None)
    state = ServerState(config, ModelManager(config), metrics.Metrics())
    app = falcon.App(
        middleware=[metrics.MetricsMiddleware(state.metrics), _RequireKey(config.api_key)]
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.add_error_handler(Exception, _render_error)
    app.add_error_handler(falcon.HTTPError, _render_error)
    app.add_route("/health", _Health())
    for family in FAMILIES:
        family.add_routes(app, state)
    return app


def _render_error(
    req: falcon.Request, resp: falcon.Response, error: Exception, params: dict
) -> None:
    api_error = from_exception(error)
    if isinstance(error, falcon.HTTPRouteNotFound):
        api_error.message = f"no route {req.method} {req.path}"
    resp.status = api_error.status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = json.dumps(error_body(family_of(req), api_error))
    if api_error.status == 401:
        resp.set_header("WWW-Authenticate", "Bearer")


class _RequireKey:
    """With an API key configured, every request must carry it, as `Authorization: Bearer KEY`
    (OpenAI, Ollama clients) or `x-api-key: KEY` (Anthropic clients)."""

    def __init__(self, api_key: str | None) -> None:
        self.api_key = api_key.encode() if api_key else None

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.api_key is None:
            return
        given = [req.get_header("x-api-key") or ""]
        authorization = req.get_header("Authorization") or ""
        if authorization[:7].lower() == "bearer ":
            given.append(authorization[7:].strip())
        if not any(hmac.compare_digest(key.encode(), self.api_key) for key in given):
            raise ApiError(
                401,
                "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
            )


class _Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}
