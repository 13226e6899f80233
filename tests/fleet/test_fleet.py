"""Two `llamay serve` replicas sharing a state directory behind a real nginx, on loopback.

Through nginx (deploy/nginx/llamay.conf, as written): a context survives kill -9 of the replica
that served it, and its continuation is bit for bit what an uninterrupted run generates
(greedy and seeded sampling); a rolling restart (SIGTERM while streams run) fails no request
and loses no context; a replica with other weights behind the same name refuses a context.
The model is a tiny synthetic one (tests/helpers/tiny.py), so that it all takes seconds.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest

from helpers.fleet import (
    REPLICA,
    SESSION,
    Nginx,
    Replica,
    find_nginx,
    free_port,
    wait_until,
)
from helpers.tiny import write_tiny

NGINX, WHY_NOT = find_nginx()
pytestmark = pytest.mark.skipif(NGINX is None, reason=WHY_NOT)

CONTEXTS = "/llamay/v1/contexts"
GREEDY = {"temperature": 0}
SEEDED = {"temperature": 0.9, "top_k": 40, "seed": 1234}


class Fleet:
    def __init__(self, root, replicas: list[Replica], nginx: Nginx) -> None:
        self.root = root
        self.replicas = replicas
        self.nginx = nginx
        self.client = httpx.Client(base_url=nginx.url, timeout=60)
        self.sessions: dict[str, str] = {}

    def by_name(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def create(self, prompt: str) -> tuple[str, str]:
        """A context made through nginx in a new session (its key: the context's id here, in
        `self.sessions`): its id and the replica that made it (`n_prompt`: its length)."""
        session = uuid.uuid4().hex
        answer = self.client.post(
            CONTEXTS, json={"model": "tiny", "prompt": prompt}, headers={SESSION: session}
        )
        assert answer.status_code == 201, answer.text
        assert answer.headers[SESSION] == session  # echoed
        context_id = answer.json()["id"]
        self.sessions[context_id] = session
        self.n_prompt = answer.json()["n_tokens"]
        return context_id, answer.headers[REPLICA]

    def logs(self) -> str:
        """What nginx and the replicas said: for a failure's message."""
        logs = [self.nginx.folder / "error.log", *(r.log for r in self.replicas)]
        return "\n".join(f"== {log}\n{log.read_text()[-2500:]}" for log in logs if log.exists())

    def headers(self, context_id: str) -> dict[str, str]:
        return {SESSION: self.sessions[context_id]}

    def generate(self, context_id: str, **options) -> httpx.Response:
        answer = self.client.post(
            f"{CONTEXTS}/{context_id}/generate",
            json={"max_tokens": 12, **options},
            headers=self.headers(context_id),
        )
        assert answer.status_code == 200, (answer.text, self.logs())
        return answer

    def persisted(self, context_id: str) -> dict:
        """Waits until the context's last change is in the state directory."""

        def written():
            info = self.client.get(f"{CONTEXTS}/{context_id}", headers=self.headers(context_id))
            body = info.json()
            return body if body["persisted_n_tokens"] == body["n_tokens"] else None

        return wait_until(written, f"context {context_id} written", seconds=30)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("fleet")
    model = write_tiny(root / "models" / "tiny.gguf", "llama", n_layer=2)
    state = root / "state"
    replicas = [
        Replica(f"replica-{i}", free_port(), model, state, root / f"home-{i}") for i in range(2)
    ]
    threads = [threading.Thread(target=r.start) for r in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    nginx = Nginx(NGINX, root / "nginx", free_port(), tuple(r.port for r in replicas))
    try:
        for replica in replicas:
            assert replica.process is not None, replica.log.read_text()
        nginx.start()
        yield Fleet(root, replicas, nginx)
    finally:
        nginx.stop()
        for replica in replicas:
            replica.stop()


def _running(fleet: Fleet) -> None:
    """Every replica up (a test may have killed one), and back in nginx's upstream: nginx
    leaves a replica that refused a connection out for the conf's fail_timeout."""
    for replica in fleet.replicas:
        if replica.process is None:
            replica.start()

    def routed(name: str) -> bool:
        # Sessions land on every replica of the ring: some of a few random ones on this one.
        for _ in range(8):
            answer = fleet.client.get("/health", headers={SESSION: uuid.uuid4().hex})
            if answer.headers.get(REPLICA) == name:
                return True
        return False

    for name in (replica.name for replica in fleet.replicas):
        wait_until(lambda name=name: routed(name), f"nginx routing to {name}", seconds=30)


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_kill_9_loses_nothing_persisted(fleet: Fleet, sampling: dict) -> None:
    _running(fleet)
    prompt = "a b c d e f g h"
    # The uninterrupted run.
    reference, _ = fleet.create(prompt)
    first = fleet.generate(reference, **sampling).json()["tokens"]
    second = fleet.generate(reference, **sampling).json()["tokens"]
    assert len(first) == len(second) == 12

    context_id, made_by = fleet.create(prompt)
    answer = fleet.generate(context_id, **sampling)
    assert answer.json()["tokens"] == first
    serving = fleet.by_name(answer.headers[REPLICA])
    assert serving.name == made_by  # the session header kept it on one replica
    n_prompt = fleet.n_prompt
    assert fleet.persisted(context_id)["n_tokens"] == n_prompt + 12

    serving.kill()
    after = fleet.generate(context_id, **sampling)
    assert after.headers[REPLICA] != serving.name
    assert after.json()["tokens"] == second
    assert after.json()["n_tokens"] == n_prompt + 24

    stats = fleet.client.get("/llamay/v1/stats", headers=fleet.headers(context_id)).json()
    assert stats["replica"]["replica"] == after.headers[REPLICA]
    assert stats["replica"]["contexts_restored"] >= 1
    metrics = fleet.client.get("/metrics", headers=fleet.headers(context_id)).text
    assert "llamay_contexts_restored_total" in metrics
    assert "llamay_contexts_resident" in metrics


def _stream(fleet: Fleet, context_id: str, started: threading.Event, out: dict) -> None:
    """A streamed generation through nginx: its tokens and how it ended, or its error."""
    try:
        with (
            httpx.Client(base_url=fleet.nginx.url, timeout=60) as client,
            client.stream(
                "POST",
                f"{CONTEXTS}/{context_id}/generate",
                json={"max_tokens": 160, "temperature": 0, "stream": True},
                headers=fleet.headers(context_id),
            ) as answer,
        ):
            out["status"] = answer.status_code
            out["replica"] = answer.headers.get(REPLICA)
            tokens, event = [], None
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    event = line[len("event: ") :]
                elif line.startswith("data: "):
                    data = json.loads(line[len("data: ") :])
                    if event == "token" and "token" in data:
                        tokens.append(data["token"])
                        started.set()
                    elif event == "done":
                        out["done"] = data
                    elif event == "error":
                        out["error"] = data
            out["tokens"] = tokens
    except Exception as error:
        out["exception"] = repr(error)
    finally:
        started.set()  # (a failure is reported by the test)


def test_rolling_restart_fails_no_request_and_loses_no_context(fleet: Fleet) -> None:
    _running(fleet)
    # Contexts on both replicas, two at least on the one to be restarted.
    made: dict[str, list[str]] = {r.name: [] for r in fleet.replicas}
    while min(len(ids) for ids in made.values()) < 2:
        context_id, replica = fleet.create("a b c")
        made[replica].append(context_id)
    leaving = fleet.replicas[0]
    contexts = [cid for ids in made.values() for cid in ids]
    n_prompt = fleet.n_prompt  # the same prompt for each
    expected = {cid: n_prompt + 160 for cid in contexts}

    outs = {cid: {} for cid in contexts}
    starts = {cid: threading.Event() for cid in contexts}
    threads = [
        threading.Thread(target=_stream, args=(fleet, cid, starts[cid], outs[cid]))
        for cid in contexts
    ]
    for thread in threads:
        thread.start()
    for cid in contexts:
        assert starts[cid].wait(60)
        assert "error" not in outs[cid] and "exception" not in outs[cid], outs[cid]
    leaving.terminate()  # while the streams run
    # New work during the drain: a new context and a generation in it.
    during, _ = fleet.create("a b c")
    assert fleet.generate(during, **GREEDY).json()["n_tokens"] == n_prompt + 12
    expected[during] = n_prompt + 12
    for thread in threads:
        thread.join(90)
    assert leaving.wait(30) == 0  # drained within the grace period
    for cid, out in outs.items():
        assert "exception" not in out and "error" not in out, (cid, out)
        assert out["status"] == 200 and out["done"]["finish_reason"] == "length", out
        assert len(out["tokens"]) == 160
        assert out["done"]["n_tokens"] == n_prompt + 160

    # Every context is there, on the replica left, and goes on.
    for cid, n_tokens in expected.items():
        info = fleet.client.get(f"{CONTEXTS}/{cid}", headers=fleet.headers(cid))
        assert info.status_code == 200, info.text
        assert info.json()["n_tokens"] == n_tokens
        assert info.headers[REPLICA] != leaving.name
    leaving.start()  # back: the ring sends its sessions to it again, which restores them
    for cid, n_tokens in expected.items():
        answer = fleet.generate(cid, max_tokens=2, **GREEDY)
        assert answer.json()["n_tokens"] == n_tokens + 2


def test_other_weights_behind_the_same_name_refuse_the_context(fleet: Fleet, tmp_path) -> None:
    _running(fleet)
    context_id, _ = fleet.create("a b")
    n_prompt = fleet.n_prompt
    fleet.generate(context_id, **GREEDY)
    fleet.persisted(context_id)
    other = write_tiny(tmp_path / "models" / "other.gguf", "llama", n_layer=2, seed=99)
    impostor = Replica(
        "impostor", free_port(), other, fleet.replicas[0].state_dir, tmp_path / "home"
    )
    impostor.start()
    try:
        answer = httpx.post(
            f"{impostor.url}{CONTEXTS}/{context_id}/generate", json={"max_tokens": 2}, timeout=30
        )
        assert answer.status_code == 409, answer.text
        message = answer.json()["error"]["message"]
        assert "other weights" in message and "'tiny'" in message and context_id in message
        # Refused without taking the context: its replica still serves it.
        assert (
            fleet.generate(context_id, max_tokens=2, **GREEDY).json()["n_tokens"] == n_prompt + 14
        )
    finally:
        impostor.stop()
