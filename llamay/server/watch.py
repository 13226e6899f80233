"""Cancelling the generations of a request whose client has gone away before its answer, and
telling whether it has (`client_gone`: a context made for nobody is not kept).

A streamed answer notices a departed client when a write fails, and the WSGI server closes the
stream (sse.respond). An answer sent whole writes nothing until the generation ends, so it
would run to `max_tokens` for no one. waitress, told to keep reading a connection while its
request runs (listen.py: channel_request_lookahead), offers `waitress.client_disconnected` in
the environ; one thread checks it for every request in `cancelled_on_disconnect`, a few times a
second, and cancels their generations (the scheduler frees their pages within a step).
Under another WSGI server without such a check, nothing is watched.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import falcon

_POLL_S = 0.2


class _Watcher:
    """One daemon thread for all requests being watched, started on the first."""

    def __init__(self) -> None:
        self._watched: dict[int, tuple[Callable[[], bool], Sequence[Any]]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, disconnected: Callable[[], bool], generations: Sequence[Any]) -> int:
        with self._lock:
            key = next(self._ids)
            self._watched[key] = (disconnected, generations)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="llamay-disconnects", daemon=True
                )
                self._thread.start()
        self._wake.set()
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._watched.pop(key, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                watched = list(self._watched.items())
            if not watched:  # asleep until a request is added
                self._wake.wait()
                self._wake.clear()
                continue
            for key, (disconnected, generations) in watched:
                if not _gone(disconnected):
                    continue
                for generation in generations:
                    if generation.finish_reason is None:
                        generation.cancel()
                self.remove(key)
            time.sleep(_POLL_S)


_WATCHER = _Watcher()


@contextlib.contextmanager
def cancelled_on_disconnect(req: falcon.Request, generations: Sequence[Any]) -> Iterator[None]:
    """While the block runs (collecting a whole answer), cancel `generations` if the client
    disconnects."""
    disconnected = req.env.get("waitress.client_disconnected")
    if disconnected is None:
        yield
        return
    key = _WATCHER.add(disconnected, list(generations))
    try:
        yield
    finally:
        _WATCHER.remove(key)


def client_gone(req: falcon.Request) -> bool:
    """Whether the request's client has disconnected (False where the WSGI server cannot tell)."""
    disconnected = req.env.get("waitress.client_disconnected")
    return disconnected is not None and _gone(disconnected)


def _gone(disconnected: Callable[[], bool]) -> bool:
    try:
        return bool(disconnected())
    except Exception:  # a closed channel: gone all the same
        return True
