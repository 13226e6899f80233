"""Running the app on waitress, as `llamay serve` does, with its connection settings chosen.

waitress's defaults let a handful of slow clients starve everyone (slowloris): 100 connections
at most, and an idle one kept for 120 s, so 150 connections that each send a header line every
few seconds hold every slot forever. Here (docs/deploy.md has the table):

- `connection_limit` (default 1000, and never more than the open-file limit allows) bounds the
  sockets; `poll()` is used, since `select()` cannot watch descriptors past 1024.
- `header_timeout` (default 10 s): a request whose headers have not all arrived that long after
  its first byte is closed. waitress has no such timeout of its own (its channel timeout counts
  from the last byte, which a trickle renews), so the server's periodic maintenance is extended
  with one, at a cleanup interval of a second.
- `channel_timeout` (default 60 s): a connection with nothing in flight is closed after that
  long idle (between keep-alive requests, or before its first byte). A request being answered
  is never cut off, however long its generation.
- `channel_request_lookahead` 1: waitress keeps reading a connection while its request runs, so
  a client that goes away is noticed (`waitress.client_disconnected` in the environ) and its
  generation cancelled.
"""

from __future__ import annotations

import resource
import time
import weakref
from typing import Any

import waitress
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer

from llamay.server.config import ServerConfig

# Descriptors kept for what is not a client connection: the model files, logs, the store.
_SPARE_FILES = 64


def create_server(app: Any, config: ServerConfig) -> Any:
    """A waitress server for `app` with the config's connection settings; `.run()` serves."""
    dispatchers: dict = {}  # waitress's socket map, ours to look into
    server = waitress.create_server(
        app,
        map=dispatchers,
        host=config.host,
        port=config.port,
        threads=config.threads,
        connection_limit=connection_limit(config.connection_limit),
        channel_timeout=config.channel_timeout,
        cleanup_interval=1,
        channel_request_lookahead=1,
        asyncore_use_poll=True,
        ident="llamay",
    )
    for dispatcher in list(dispatchers.values()):
        if isinstance(dispatcher, BaseWSGIServer):
            _add_header_deadline(dispatcher, config.header_timeout)
    return server


def connection_limit(wanted: int) -> int:
    """`wanted`, or fewer if the process may not open that many files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - _SPARE_FILES))


def _add_header_deadline(server: BaseWSGIServer, seconds: float) -> None:
    """Extends `server`'s maintenance (run about once a second from its event loop) so that a
    request still without all its headers `seconds` after it was first seen is closed."""
    maintenance = server.maintenance
    first_seen: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def maintenance_with_deadline(now: float) -> None:
        maintenance(now)
        clock = time.monotonic()
        for channel in list(server.active_channels.values()):
            if _awaits_headers(channel):
                started = first_seen.setdefault(channel.request, clock)
                if clock - started > seconds:
                    channel.will_close = True

    server.maintenance = maintenance_with_deadline


def _awaits_headers(channel: HTTPChannel) -> bool:
    """A request has begun on `channel` (its first bytes came) and its headers are not done."""
    request = channel.request
    return request is not None and not request.headers_finished and not channel.requests
