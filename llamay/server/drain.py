"""Readiness and a graceful stop: `/ready`, requests in flight, and what SIGTERM does.

`GET /health` says the process answers; `GET /ready` says it should be sent work: it is not
draining, its state directory (if any) takes a write, and the model names it was given resolve
to files. A SIGTERM (listen.py) drains the replica within the grace period:

1. `/ready` answers 503, and so does every new request but `/health`, `/ready` and `/metrics`
   (a proxy sends it to another replica: nginx's `proxy_next_upstream http_503`);
2. the listening sockets are closed, and connections with nothing in flight after them;
3. requests in flight are given the grace period less a margin to finish, and each context
   is written and its lease given back as soon as nothing runs in it (another replica takes
   it at once); streams still running at the end are ended (the context keeps what they
   generated);
4. every context's changes are written to the state directory and its lease given back;
5. the process exits 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import falcon

from llamay.errors import LlamayError
from llamay.server.errors import ApiError
from llamay.server.metrics import after_stream
from llamay.server.state import Route, ServerState

# Routes a draining replica still answers: the probes and the scrape.
_ALWAYS = frozenset({"/health", "/ready", "/metrics"})
# How often a drain lets go of the contexts that became idle.
_LET_GO_EVERY_S = 0.1


class InFlight:
    """Counts the requests being answered, a streamed one until its last byte; refuses new ones
    (503) once the server drains. A falcon middleware: put it first."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._count = 0
        self._idle = threading.Condition()

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._idle:
            self._count += 1
        req.context.in_flight = True
        if self.state.draining and req.path not in _ALWAYS:
            raise ApiError(
                503, "this replica is shutting down; another one will answer", retry_after=1
            )

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if not getattr(req.context, "in_flight", False):
            return
        if resp.stream is not None and not hasattr(resp.stream, "read"):
            resp.stream = after_stream(resp.stream, self._done)
        else:
            self._done()

    def _done(self) -> None:
        with self._idle:
            self._count -= 1
            self._idle.notify_all()

    def wait_idle(self, until: float) -> bool:
        """Waits until no request is in flight or time.monotonic() reaches `until`."""
        with self._idle:
            while self._count > 0:
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.1))
        return True

    @property
    def count(self) -> int:
        with self._idle:
            return self._count


def drain(state: ServerState, in_flight: InFlight, stop_listening: Callable[[], None]) -> bool:
    """The steps of the module docstring but the exit; True when every request finished and
    every context was written within the grace period."""
    started = time.monotonic()
    grace = state.config.grace_period
    deadline = started + grace
    # Room, at the end of the grace period, for ending streams and writing their contexts.
    margin = min(5.0, grace / 5)
    state.draining = True
    stop_listening()
    finished = _wait_letting_go(state, in_flight, deadline - margin)
    if not finished:
        for entry in state.contexts.all():
            generation = entry.generation
            if generation is not None:
                generation.cancel()
        finished = _wait_letting_go(state, in_flight, deadline - margin / 2)
    written = state.contexts.drain(max(0.0, deadline - time.monotonic()))
    return finished and written


def _wait_letting_go(state: ServerState, in_flight: InFlight, until: float) -> bool:
    """Waits for the requests in flight; meanwhile each context is written and let go as soon
    as it is idle, so that the replica a proxy sends its next request to need not wait for its
    lease."""
    contexts = state.contexts
    while True:
        contexts.flush(max(0.0, until - time.monotonic()))
        contexts.let_go_idle()
        if in_flight.wait_idle(min(until, time.monotonic() + _LET_GO_EVERY_S)):
            contexts.flush(max(0.0, until - time.monotonic()))
            contexts.let_go_idle()
            return True
        if time.monotonic() >= until:
            return False


def readiness(state: ServerState) -> list[str]:
    """Why this replica should not be sent work (empty: it is ready)."""
    problems = []
    if state.draining:
        problems.append("shutting down (SIGTERM)")
    replication = state.contexts.replication
    if replication is not None:
        why = replication.store.writable()
        if why is not None:
            problems.append(f"state directory not writable: {why}")
    for name in state.config.aliases:
        try:
            state.models.resolve(name)
        except LlamayError as error:
            problems.append(f"--alias {name!r}: {error}")
    return problems


class Ready(Route):
    """`GET /ready`: 200 `{"status": "ready", "replica"}`, or 503 `{"status": "not ready",
    "replica", "problems": [...]}`."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        problems = readiness(self.state)
        replica = self.state.config.replica()
        if problems:
            resp.status = falcon.HTTP_503
            resp.media = {"status": "not ready", "replica": replica, "problems": problems}
        else:
            resp.media = {"status": "ready", "replica": replica}
