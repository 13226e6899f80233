"""Replicas of `llamay serve` sharing a state directory, and a real nginx in front of them.

nginx runs deploy/nginx/llamay.conf as written, with only its addresses replaced by free
loopback ports, inside a minimal main config of the test's own (pid, logs and temp folders in
the test's directory). `find_nginx()` gives the binary, or why there is none.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from helpers import waiting
from helpers.clitools import LLAMAY

REPO = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO / "deploy" / "nginx" / "llamay.conf"
# The addresses deploy/nginx/llamay.conf names: two replicas and where nginx listens.
CONF_REPLICAS = ("127.0.0.1:11435", "127.0.0.1:11436")
CONF_LISTEN = "127.0.0.1:8080"
SESSION = "x-llamay-session"
REPLICA = "x-llamay-replica"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def find_nginx() -> tuple[str | None, str]:
    """The nginx binary, or None and why not."""
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate, ""
    return None, (
        "nginx is not installed and this test cannot install it: run "
        "`apt-get install -y nginx-light` (as .ci/run does where it may)"
    )


def wait_until(check, what: str, seconds: float = 120.0, process=None, log: Path | None = None):
    """waiting.wait_until for a server: a refused connection means not yet, an exit of
    `process` means never; either failure shows the end of its `log`."""

    def ready():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: exited {process.returncode}: {_tail(log)}")
        try:
            return check()
        except httpx.TransportError:
            return None

    try:
        return waiting.wait_until(ready, seconds, what)
    except AssertionError as timed_out:
        raise RuntimeError(f"{timed_out}: {_tail(log)}") from None


def _tail(log: Path | None) -> str:
    return log.read_text()[-3000:] if log is not None and log.exists() else ""


@dataclass
class Replica:
    """One `llamay serve --state-dir`: its name, port and process (None: not running)."""

    name: str
    port: int
    model: Path
    state_dir: Path
    home: Path
    extra: tuple[str, ...] = ()
    process: subprocess.Popen | None = None
    exits: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / f"{self.name}.log"

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "LLAMAY_API_KEY"}
        env["LLAMAY_HOME"] = str(self.home)
        command = [
            str(LLAMAY), "serve", "--port", str(self.port),
            "--models-dir", str(self.model.parent), "--alias", f"tiny={self.model}",
            "--state-dir", str(self.state_dir), "--replica-name", self.name,
            "--lease-ttl", "2s", "--lease-wait", "6s", "--grace-period", "20s",
            "--model-threads", "1", "--kv-memory", "8MiB", *self.extra,
        ]  # fmt: skip
        log = open(self.log, "ab")  # noqa: SIM115 - the server writes it while it runs
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until(
            lambda: httpx.get(self.url + "/ready", timeout=1).is_success,
            f"replica {self.name}",
            process=self.process,
            log=self.log,
        )

    def kill(self) -> None:
        """kill -9."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.exits.append(self.process.wait())
        self.process = None

    def terminate(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)

    def wait(self, seconds: float) -> int:
        assert self.process is not None
        code = self.process.wait(seconds)
        self.exits.append(code)
        self.process = None
        return code

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@dataclass
class Nginx:
    binary: str
    folder: Path
    port: int
    upstreams: tuple[int, ...]
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        site = NGINX_CONF.read_text()
        for placeholder, port in zip(CONF_REPLICAS, self.upstreams, strict=True):
            assert placeholder in site, f"{NGINX_CONF} no longer names {placeholder}"
            site = site.replace(placeholder, f"127.0.0.1:{port}")
        assert CONF_LISTEN in site, f"{NGINX_CONF} no longer listens on {CONF_LISTEN}"
        site = site.replace(CONF_LISTEN, f"127.0.0.1:{self.port}")
        (self.folder / "llamay.conf").write_text(site)
        temp = "\n".join(
            f"    {kind}_temp_path {self.folder / kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        user = "user root;\n" if os.geteuid() == 0 else ""
        (self.folder / "nginx.conf").write_text(
            f"{user}worker_processes 1;\ndaemon off;\npid {self.folder / 'nginx.pid'};\n"
            f"error_log {self.folder / 'error.log'} info;\n"
            "events { worker_connections 512; }\n"
            f"http {{\n    access_log {self.folder / 'access.log'};\n{temp}\n"
            f"    include {self.folder / 'llamay.conf'};\n}}\n"
        )
        check = subprocess.run(
            [self.binary, "-t", "-p", str(self.folder), "-c", str(self.folder / "nginx.conf")],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stderr
        log = open(self.folder / "stderr.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [self.binary, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until(
            lambda: httpx.get(self.url + "/health", timeout=1).is_success,
            "nginx",
            process=self.process,
            log=self.folder / "error.log",
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None
