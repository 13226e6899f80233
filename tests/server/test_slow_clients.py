"""Slow clients must not starve the others (slowloris): with waitress's defaults, 150
connections that each sent a header line every few seconds held all of its 100 connection
slots, and nobody else was answered, /health included, for as long as they trickled.

A request whose headers never finish is closed after --header-timeout, however often it
trickles; one that finishes them within it is answered.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx
import pytest

from helpers.waiting import wait_until

FLOOD = 150
HEADER_TIMEOUT_S = 10
SLOW_LINES = 10  # half a second apart


@pytest.fixture(scope="module")
def patient_server(launch, tmp_path_factory):
    """Headers may take longer than the flood test runs: no flood connection is closed for
    its headers while the test looks."""
    return launch(tmp_path_factory.mktemp("slowloris-home"), "--header-timeout", "3600")


@pytest.fixture(scope="module")
def strict_server(launch, tmp_path_factory):
    return launch(
        tmp_path_factory.mktemp("header-timeout-home"), "--header-timeout", str(HEADER_TIMEOUT_S)
    )


def connect(server) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.settimeout(None)  # blocking, so that a MSG_DONTWAIT peek never waits
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:  # open, and nothing was sent back
        return False
    except ConnectionResetError:
        return True


class Trickle:
    """`n` connections that each send a request line and then one header line every
    `every` seconds, never finishing their headers; `rounds` counts the lines sent."""

    def __init__(self, server, n: int, every: float) -> None:
        self.sockets = []
        for _ in range(n):
            sock = connect(server)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.sockets.append(sock)
        self.every = every
        self.rounds = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        while not self.stopped.wait(self.every):
            self.rounds += 1
            for sock in self.sockets:
                # closed by the server: what the header timeout is for
                with contextlib.suppress(OSError):
                    sock.sendall(f"X-Slow-{self.rounds}: 1\r\n".encode())

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        for sock in self.sockets:
            sock.close()


def test_a_slow_header_flood_leaves_health_answering(patient_server):
    flood = Trickle(patient_server, FLOOD, every=1.0)
    try:
        wait_until(lambda: flood.rounds >= 1, 60, "the flood did not trickle")
        health = httpx.get(patient_server.url("/health"), timeout=60)
        still_trickling = [not closed_by_server(sock) for sock in flood.sockets]
    finally:
        flood.close()
    assert health.status_code == 200
    # Answered while every slow connection was still open: not once some of them were closed.
    assert all(still_trickling)


def test_a_request_whose_headers_never_finish_is_closed(strict_server):
    # A line every half second: never idle, so only the header timeout can close it (waitress's
    # own timeout counts from the last byte).
    trickle = Trickle(strict_server, 1, every=0.5)
    try:
        wait_until(
            lambda: closed_by_server(trickle.sockets[0]), 120, "the trickling request stayed open"
        )
    finally:
        trickle.close()


def test_a_slow_request_that_finishes_its_headers_in_time_is_answered(strict_server):
    with connect(strict_server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for line in range(SLOW_LINES):
            time.sleep(0.5)  # slow, half the header timeout, and not cut off for it
            sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
        sock.sendall(b"Connection: close\r\n\r\n")
        sock.settimeout(60)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer
