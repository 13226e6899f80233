"""How `llamay serve`'s waitress loop ends after a drain (listen.py): every socket it watches is
closed from inside the loop, never by an exception from a signal handler.

The bug this guards: the second SIGTERM raised SystemExit wherever the main thread was, and when
that was inside one of the trigger's tasks (the drain queues one ten times a second), waitress's
bare `except:` around them swallowed it. The server then ran on with no listener, and CI's
`terminate(); wait(60)` timed out."""

from __future__ import annotations

import socket
import threading

from llamay.server.config import ServerConfig
from llamay.server.listen import create_server, run_loop, stop_loop


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]


def run_in_main_thread(server, meanwhile) -> list[str]:
    """Runs `server` here until its loop returns, with `meanwhile(server)` in another thread; the
    names of the server's threads still alive afterwards."""
    helper = threading.Thread(target=meanwhile, args=(server,), daemon=True)
    helper.start()
    run_loop(server)
    helper.join(30)
    assert not helper.is_alive()
    return [t.name for t in threading.enumerate() if t.name.startswith("waitress-")]


def test_stop_loop_ends_the_loop_with_a_kept_alive_connection_open():
    server = create_server(hello, ServerConfig(host="127.0.0.1", port=0, threads=2))
    port = server.socket.getsockname()[1]
    answered = []

    def client_then_stop(server):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            response = b""
            while not response.endswith(b"hello"):  # the head and the body may come apart
                response += conn.recv(4096)
            answered.append(response)
            stop_loop(server)  # the connection is still open, kept alive
            assert conn.recv(4096) == b""  # closed by the server

    left = run_in_main_thread(server, client_then_stop)
    assert answered[0].startswith(b"HTTP/1.1 200 OK")
    assert left == []
    assert server.llamay_sockets == {}


def test_stop_loop_ends_the_loop_while_the_trigger_is_busy_with_other_tasks():
    server = create_server(hello, ServerConfig(host="127.0.0.1", port=0, threads=2))
    ran = []

    def flood_then_stop(server):
        for _ in range(2000):
            server.trigger.pull_trigger(lambda: ran.append(1))
        stop_loop(server)

    assert run_in_main_thread(server, flood_then_stop) == []
    assert len(ran) == 2000  # the tasks queued before the stop all ran
    assert server.llamay_sockets == {}
