"""A real `llamay serve` on a free loopback port, started as a user starts it: the console
script in its own process, with its own LLAMAY_HOME (sharing the model blobs), serving the real
Gemma 3 270M as `gemma3:270m`. The server tests (tests/server/conftest.py) and the browser
tests (tests/ui) start theirs here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from helpers.clitools import LLAMAY

MODEL = "gemma3:270m"
API_KEY = "test-key-5f2c9"
# Small contexts keep the overflow tests cheap; enough threads for the concurrency tests.
SERVE_ARGS = ("--ctx-size", "1024", "--threads", "24")


@dataclass
class Server:
    """A running `llamay serve`: its base URL (`http://127.0.0.1:PORT`), the key it requires
    (None: none), its LLAMAY_HOME and its process; `model` is the name it serves Gemma under."""

    base_url: str
    api_key: str | None
    home: Path
    process: subprocess.Popen
    model: str = MODEL

    def url(self, path: str) -> str:
        return self.base_url + path

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(home: Path, *args: str, api_key: str | None = None) -> Server:
    """Start `llamay serve` with `args` and wait until it answers /health."""
    shared_blobs = Path(os.environ.get("LLAMAY_TEST_BLOBS", Path.home() / ".llamay" / "blobs"))
    shared_blobs.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "blobs").exists():
        (home / "blobs").symlink_to(shared_blobs, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "LLAMAY_API_KEY"}
    env["LLAMAY_HOME"] = str(home)
    port = free_port()
    command = [str(LLAMAY), "serve", "--port", str(port), *SERVE_ARGS, *args]
    if api_key:
        command += ["--api-key", api_key]
    log = open(home / "serve.log", "wb")  # noqa: SIM115 - the server writes it while it runs
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", api_key, home, process)
    deadline = time.monotonic() + 180  # a loaded 2-core machine starts it slowly
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llamay serve exited: {(home / 'serve.log').read_text()}")
        try:
            if httpx.get(server.url("/health"), headers=server.headers(), timeout=1).is_success:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"llamay serve did not answer: {(home / 'serve.log').read_text()}")
        time.sleep(0.1)


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
