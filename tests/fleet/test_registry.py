"""The context registry (llamay/server/contexts.py), on a real tiny model: purely local without
a replication policy; with one over a state directory (replication.py), two registries in one
process over one directory stand for two replicas."""

from __future__ import annotations

import math

import pytest

import llamay
from llamay.server.contexts import ContextRegistry
from llamay.server.errors import ApiError
from llamay.server.metrics import Metrics
from llamay.server.replication import Replication
from llamay.server.statedir import StateDir

from helpers.tiny import write_tiny
from helpers.waiting import wait_until


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_tiny(tmp_path_factory.mktemp("model") / "tiny.gguf", "llama", n_layer=2)
    loaded = llamay.load(path, threads=1)
    yield loaded
    loaded.close()


def _replica(root, name: str, model, *, limit: int = 8, ttl: float = math.inf, wait=0.5):
    metrics = Metrics()
    replication = Replication(
        StateDir(root, name, lease_ttl=30),
        lambda _name: model,
        metrics=metrics,
        lease_wait=wait,
    )
    registry = ContextRegistry(limit, ttl, replication)
    return registry, metrics


def _made(registry: ContextRegistry, model, ids=(1, 5, 9, 13)):
    context = model.context()
    context.feed(list(ids))
    entry = registry.add("tiny", context)
    assert registry.flush(10)
    return entry


def test_a_busy_context_elsewhere_is_a_409_naming_its_holder(tmp_path, model) -> None:
    one, _ = _replica(tmp_path, "replica-a", model)
    two, metrics = _replica(tmp_path, "replica-b", model)
    entry = _made(one, model)
    with entry.mutex:
        entry.busy = True  # as while a generation runs in it
    with pytest.raises(ApiError) as refused:
        two.get(entry.id)
    assert refused.value.status == 409
    assert "replica 'replica-a'" in refused.value.message
    assert metrics.fleet()["lease_conflicts"] == 1
    with entry.mutex:
        entry.busy = False
    # Idle now: replica-a hands it over when replica-b asks.
    taken = two.get(entry.id)
    assert taken.context.tokens == [1, 5, 9, 13]
    assert entry.id not in {e.id for e in one.all()}
    assert metrics.fleet()["contexts_restored"] == 1


def test_what_was_written_is_restored_bit_for_bit(tmp_path, model) -> None:
    one, _ = _replica(tmp_path, "replica-a", model)
    entry = _made(one, model)
    expected = entry.context.logits().copy()
    one.drain(10)  # as at the end of a SIGTERM: written, lease given back
    two, _ = _replica(tmp_path, "replica-b", model)
    restored = two.get(entry.id)
    assert restored.persisted_n_tokens == 4
    assert restored.context.logits().tobytes() == expected.tobytes()
    restored.context.feed([7])
    two.touch(restored)
    assert two.flush(10)
    assert two.replication.store.manifest(entry.id)["n_tokens"] == 5


def test_past_the_limit_a_written_idle_context_goes_back_to_the_directory(tmp_path, model) -> None:
    one, _ = _replica(tmp_path, "replica-a", model, limit=2)
    first, second = _made(one, model), _made(one, model, (2, 3))
    third = _made(one, model, (4, 6))
    resident = {e.id for e in one.all()}
    assert resident == {second.id, third.id}  # the least recently used one let go
    assert first.id in {item["id"] for item in one.listing()}
    assert one.get(first.id).context.tokens == [1, 5, 9, 13]  # and back from the directory


def test_expiry_deletes_from_the_directory_too(tmp_path, model) -> None:
    one, _ = _replica(tmp_path, "replica-a", model, ttl=0.2)
    entry = _made(one, model)

    def expired() -> bool:
        one.expire()  # (the reaper may have been first)
        return one.replication.store.ids() == []

    wait_until(expired, 30, "the context did not expire from the directory")
    with pytest.raises(ApiError) as missing:
        one.get(entry.id)
    assert missing.value.status == 404


# --- without a replication policy ---------------------------------------------------------------


def _context(model, ids=(1, 5, 9)):
    context = model.context()
    context.feed(list(ids))
    return context


def test_past_the_limit_a_local_registry_lets_nothing_go(model) -> None:
    registry = ContextRegistry(2, math.inf)
    first, second = registry.add("tiny", _context(model)), registry.add("tiny", _context(model))
    third = _context(model)
    with pytest.raises(ApiError) as full:
        registry.add("tiny", third)
    assert full.value.status == 429 and "--max-contexts" in full.value.message
    assert third.closed  # refused: its pages given back
    registry.let_go_idle()  # a drain: nowhere to keep them, so they stay
    assert registry.drain() and registry.flush()
    assert {entry.id for entry in registry.all()} == {first.id, second.id}
    assert registry.stats() == {
        "resident_contexts": 2,
        "unwritten_contexts": 0,
        "state_dir": None,
        "replica": None,
    }
    assert registry.get(first.id).persisted_n_tokens is None


def test_removed_and_expired_contexts_are_gone(model) -> None:
    registry = ContextRegistry(8, math.inf)
    kept, gone = registry.add("tiny", _context(model)), registry.add("tiny", _context(model))
    assert registry.remove(gone.id) is gone
    gone.context.close()  # the caller's to close
    with pytest.raises(ApiError) as missing:
        registry.get(gone.id)
    assert missing.value.status == 404
    assert [item["id"] for item in registry.listing()] == [kept.id]
    registry.ttl = 0.0  # every idle context is past it now
    assert registry.expire() == [kept.id]
    assert kept.context.closed and registry.all() == []
