"""`create_app(config)`: the WSGI app every API family lives in.

It runs under waitress (`llamay serve`) or any other WSGI server (docs/deploy.md). Here are the
parts every route shares: who may call (guard.py: Host, Origin, CORS, the API key), error
rendering in the shape of the request's family, metrics, the contexts every API keeps on the
server (contexts.py; with a state directory, replication.py over statedir.py), `GET /health`
and `GET /ready`
(drain.py). The chat page (ui.py) is one more family of routes.
"""

from __future__ import annotations

import json
import os

import falcon

from llamay.server import (
    anthropic,
    llama_server,
    metrics,
    native,
    ollama,
    openai,
    openapi,
    rerank,
    responses,
    ui,
)
from llamay.server.config import ServerConfig
from llamay.server.contexts import ContextRegistry
from llamay.server.drain import InFlight, Ready
from llamay.server.errors import error_body, family_of, from_exception
from llamay.server.guard import Guard, RequireKey
from llamay.server.models import ModelManager
from llamay.server.replication import Replication
from llamay.server.state import ServerState
from llamay.server.statedir import StateDir

FAMILIES = (
    openai,
    responses,
    anthropic,
    ollama,
    native,
    metrics,
    rerank,
    llama_server,
    openapi,
    ui,
)


def create_app(config: ServerConfig | None = None) -> falcon.App:
    """The server's WSGI app. Without a config: the defaults, and the API key from
    $LLAMAY_API_KEY (as under gunicorn: `gunicorn 'llamay.server:create_app()'`)."""
    if config is None:
        config = ServerConfig(api_key=os.environ.get("LLAMAY_API_KEY") or None)
    models, counters = ModelManager(config), metrics.Metrics()
    replication = None
    if config.state_dir is not None:
        store = StateDir(config.state_dir, config.replica(), config.lease_ttl)
        replication = Replication(store, models.get, metrics=counters, lease_wait=config.lease_wait)
    contexts = ContextRegistry(config.max_contexts, config.context_ttl, replication)
    state = ServerState(config, models, counters, contexts)
    in_flight = InFlight(state)
    middleware: list = [in_flight]
    if replication is not None:
        middleware.append(_NameReplica(replication.store.owner))
    guard = Guard(config.host, config.api_key is not None, config.allowed_origins)
    app = openapi.RoutedApp(
        middleware=[
            *middleware,
            metrics.MetricsMiddleware(state.metrics),
            guard,
            RequireKey(config.api_key, public=ui.is_public),
        ]
    )
    app.llamay_state = state  # what `llamay serve` drains on SIGTERM (listen.py)
    app.llamay_in_flight = in_flight
    app.req_options.strip_url_path_trailing_slash = True
    app.add_error_handler(Exception, _render_error)
    app.add_error_handler(falcon.HTTPError, _render_error)
    app.add_route("/health", _Health())
    app.add_route("/ready", Ready(state))
    openapi.describe(
        "GET",
        "/ready",
        "Whether this replica should be sent work",
        tag="meta",
        response={
            "type": "object",
            "properties": {"status": {"type": "string"}, "replica": {"type": "string"}},
        },
        errors={
            503: "not ready: draining, the state directory takes no write, or an alias "
            "resolves to no model"
        },
    )
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
    if api_error.retry_after is not None:
        resp.set_header("Retry-After", str(api_error.retry_after))


class _NameReplica:
    """Names the replica that answered (`x-llamay-replica`): with a state directory, which
    one a proxy chose is worth seeing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        resp.set_header("x-llamay-replica", self.name)


class _Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}
