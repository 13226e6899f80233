"""Slow clients must not starve the others (slowloris): with waitress's defaults, 150
connections that each sent a header line every few seconds held all of its 100 connection
slots, and nobody else was answered, /health included.

The one place a one-second bound is the behaviour under test: a healthy server answers /health
in milliseconds, a starved one never, so the bound leaves room for a loaded machine.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx
import pytest

FLOOD = 150
HEALTHY_S = 1.0


@pytest.fixture(scope="module")
def slow_server(launch, tmp_path_factory):
    return launch(tmp_path_factory.mktemp("slowloris-home"), "--header-timeout", "4")


def health_seconds(server) -> float:
    started = time.monotonic()
    assert httpx.get(server.url("/health"), timeout=30).status_code == 200
    return time.monotonic() - started


class Trickle:
    """`n` connections that each send a request line and then one header line every
    `every` seconds, never finishing their headers."""

    def __init__(self, server, n: int, every: float) -> None:
        host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
        self.sockets = []
        for _ in range(n):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.sockets.append(sock)
        self.every = every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        line = 0
        while not self.stopped.wait(self.every):
            line += 1
            for sock in self.sockets:
                # closed by the server: what the header timeout is for
                with contextlib.suppress(OSError):
                    sock.sendall(f"X-Slow-{line}: 1\r\n".encode())

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        for sock in self.sockets:
            sock.close()


def test_a_slow_header_flood_leaves_health_answering(slow_server):
    baseline = max(health_seconds(slow_server) for _ in range(3))
    flood = Trickle(slow_server, FLOOD, every=1.0)
    try:
        time.sleep(2)  # every connection is open and trickling
        during = [health_seconds(slow_server) for _ in range(5)]
    finally:
        flood.close()
    assert max(during) < HEALTHY_S + baseline, (baseline, during)


def test_a_request_whose_headers_never_finish_is_closed(slow_server):
    flood = Trickle(slow_server, 1, every=0.5)
    sock = flood.sockets[0]
    sock.settimeout(1)
    closed_after = None
    started = time.monotonic()
    try:
        while time.monotonic() - started < 60:
            try:
                if sock.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_after = time.monotonic() - started
                break
    finally:
        flood.close()
    # --header-timeout 4: closed within a few seconds of it, however often it trickles.
    assert closed_after is not None and 3 < closed_after < 30
