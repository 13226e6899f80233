"""`/ready` and a draining replica's answers, on the app itself (falcon's test client): the
SIGTERM path end to end is in test_fleet.py."""

from __future__ import annotations

import falcon.testing

from llamay.server import create_app
from llamay.server.config import ServerConfig

HOST = {"Host": "127.0.0.1"}


def _client(**config) -> tuple[falcon.testing.TestClient, object]:
    app = create_app(ServerConfig(**config))
    return falcon.testing.TestClient(app, headers=HOST), app


def test_ready_names_the_replica_and_says_why_not(tmp_path) -> None:
    state_dir = tmp_path / "state"
    client, app = _client(state_dir=state_dir, replica_name="replica-a")
    ready = client.simulate_get("/ready")
    assert ready.status_code == 200
    assert ready.json == {"status": "ready", "replica": "replica-a"}
    assert ready.headers["x-llamay-replica"] == "replica-a"

    app.llamay_state.contexts.replication.store.root = tmp_path / "file" / "below"
    (tmp_path / "file").write_text("not a folder")
    not_ready = client.simulate_get("/ready")
    assert not_ready.status_code == 503
    assert not_ready.json["status"] == "not ready"
    assert "state directory not writable" in not_ready.json["problems"][0]


def test_an_alias_of_nothing_is_not_ready(tmp_path) -> None:
    client, _ = _client(aliases={"chat": str(tmp_path / "missing.gguf")})
    answer = client.simulate_get("/ready")
    assert answer.status_code == 503
    assert "'chat'" in answer.json["problems"][0]


def test_a_draining_replica_refuses_new_work_but_answers_probes() -> None:
    client, app = _client()
    app.llamay_state.draining = True
    refused = client.simulate_get("/llamay/v1/contexts")
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "1"
    assert "shutting down" in refused.json["error"]["message"]
    assert client.simulate_get("/health").status_code == 200
    assert client.simulate_get("/ready").json["problems"] == ["shutting down (SIGTERM)"]
    assert client.simulate_get("/metrics").status_code == 200
    assert app.llamay_in_flight.count == 0  # refused requests are not left counted
