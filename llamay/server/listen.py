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

`run_until_drained()` runs it until SIGTERM, then drains (drain.py): the listening sockets are closed from
waitress's own loop (its trigger runs code there), idle connections are closed as they go idle,
and once the drain is done every socket left is closed from that loop too, which ends it (it runs
while it has sockets). The end is never an exception raised by a signal handler: Python runs the
handler wherever the main thread happens to be, and where that is inside one of the trigger's
tasks, waitress's bare `except:` around them swallowed the SystemExit and the server ran on.
"""

from __future__ import annotations

import resource
import signal
import sys
import threading
import time
import weakref
from typing import Any

import waitress
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer

from llamay.server.config import ServerConfig
from llamay.server.drain import drain

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
    server.llamay_sockets = dispatchers  # what a drain closes (run_until_drained)
    return server


def run_until_drained(app: Any, server: Any) -> None:
    """Runs `server` (create_server's, for `app`) until SIGTERM has drained it."""
    draining = threading.Event()

    def on_sigterm(signum: int, frame: Any) -> None:
        if not draining.is_set():
            draining.set()
            threading.Thread(target=run_drain, name="llamay-drain", daemon=True).start()

    def run_drain() -> None:
        state = app.llamay_state
        print(
            f"llamay: SIGTERM: draining (grace period {state.config.grace_period:g}s)",
            file=sys.stderr,
            flush=True,
        )
        closing = threading.Event()
        closer = threading.Thread(target=_close_idle_until, args=(server, closing), daemon=True)
        closer.start()
        try:
            clean = drain(state, app.llamay_in_flight, lambda: _stop_listening(server))
        finally:
            closing.set()
            closer.join()  # its last task is queued before the trigger closes
        word = "every request finished, every context written" if clean else "grace period over"
        print(f"llamay: drained: {word}", file=sys.stderr, flush=True)
        stop_loop(server)

    signal.signal(signal.SIGTERM, on_sigterm)
    run_loop(server)


def run_loop(server: Any) -> None:
    """Runs `server`'s loop until `stop_loop()` (or Ctrl-C), then stops its worker threads."""
    server.run()
    server.task_dispatcher.shutdown()  # waitress does this itself only when run() is interrupted


def stop_loop(server: Any) -> None:
    """Ends `server.run()`: every socket it watches (connections, listeners, its trigger) is
    closed from its own loop, which returns once it watches none."""
    _trigger(server).pull_trigger(lambda: wasyncore.close_all(_socket_map(server)))


def _socket_map(server: Any) -> dict:
    """waitress's map of the server's sockets (one server, or several listening addresses)."""
    return server.llamay_sockets


def _stop_listening(server: Any) -> None:
    """Closes the listening sockets, in waitress's loop: new connections are refused."""

    def close() -> None:
        for dispatcher in list(_socket_map(server).values()):
            if isinstance(dispatcher, BaseWSGIServer):
                dispatcher.accepting = False
                wasyncore.dispatcher.close(dispatcher)  # the socket only, not the trigger

    _trigger(server).pull_trigger(close)


def _close_idle_until(server: Any, done: threading.Event) -> None:
    """Closes each connection with nothing in flight, ten times a second until `done`: a
    proxy's kept-alive connections go as their last answers end."""

    def close_idle() -> None:
        for channel in list(_socket_map(server).values()):
            if isinstance(channel, HTTPChannel) and not channel.requests:
                channel.close_when_flushed = True

    while not done.wait(0.1):
        _trigger(server).pull_trigger(close_idle)


def _trigger(server: Any) -> Any:
    if hasattr(server, "trigger"):
        return server.trigger
    return next(d for d in _socket_map(server).values() if hasattr(d, "pull_trigger"))


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
