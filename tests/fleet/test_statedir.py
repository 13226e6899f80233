"""The state directory's leases and files (llamay/server/statedir.py), two replicas in one
process: each StateDir is a replica's view, with its own token."""

from __future__ import annotations

import json
import time

import pytest

from llamay.server.statedir import LEASE, LeaseConflict, StateDir, valid_id

from helpers.waiting import wait_until


def test_a_live_lease_elsewhere_is_refused_naming_its_owner(tmp_path) -> None:
    one, two = StateDir(tmp_path, "replica-a", 30), StateDir(tmp_path, "replica-b", 30)
    one.acquire("ctx-1")
    with pytest.raises(LeaseConflict, match="replica 'replica-a'") as refused:
        two.acquire("ctx-1")
    assert refused.value.owner == "replica-a"
    assert one.holds("ctx-1") and not two.holds("ctx-1")
    one.acquire("ctx-1")  # ours: renewed


def test_a_stale_lease_is_taken_over_and_its_old_holder_learns_it(tmp_path) -> None:
    one, two = StateDir(tmp_path, "replica-a", 0.05), StateDir(tmp_path, "replica-b", 30)
    one.acquire("ctx-1")
    wait_until(  # past one's lease: it hung, or died
        lambda: one.lease("ctx-1").expires < time.time(), 30, "replica-a's lease never ran out"
    )
    two.acquire("ctx-1")
    assert two.holds("ctx-1")
    assert not one.renew("ctx-1")  # so it drops the context, unwritten
    assert not one.commit("ctx-1", lambda path: path.write_bytes(b"stale"), {"model": "m"})
    assert not (tmp_path / "contexts" / "ctx-1" / "snapshot.llamay").exists()


def test_a_restarted_replica_takes_its_own_name_back_at_once(tmp_path) -> None:
    StateDir(tmp_path, "replica-a", 30).acquire("ctx-1")
    again = StateDir(tmp_path, "replica-a", 30)  # the same name, a new process
    again.acquire("ctx-1")
    assert again.holds("ctx-1")


def test_released_and_damaged_leases_hold_nothing(tmp_path) -> None:
    one, two = StateDir(tmp_path, "replica-a", 30), StateDir(tmp_path, "replica-b", 30)
    one.acquire("ctx-1")
    one.release("ctx-1")
    two.acquire("ctx-1")
    (tmp_path / "contexts" / "ctx-1" / LEASE).write_text("{not json")
    one.acquire("ctx-1")
    assert one.holds("ctx-1")


def test_a_wanted_context_is_marked_until_taken(tmp_path) -> None:
    one, two = StateDir(tmp_path, "replica-a", 30), StateDir(tmp_path, "replica-b", 30)
    one.acquire("ctx-1")
    assert not one.wanted("ctx-1")
    two.ask("ctx-1")
    assert one.wanted("ctx-1")
    one.release("ctx-1")
    two.acquire("ctx-1")
    assert not one.wanted("ctx-1")


def test_contents_need_the_lease_and_a_manifest(tmp_path) -> None:
    one = StateDir(tmp_path, "replica-a", 30)
    one.acquire("ctx-1")
    assert one.manifest("ctx-1") is None and one.ids() == []  # a creation not yet written
    manifest = {"model": "tiny", "fingerprint": "f" * 64, "n_tokens": 3}
    assert one.commit("ctx-1", lambda path: path.write_bytes(b"KV"), manifest)
    record = one.manifest("ctx-1")
    assert record["owner"] == "replica-a" and record["n_tokens"] == 3
    assert one.ids() == ["ctx-1"]
    (tmp_path / "contexts" / "ctx-1" / "manifest.json").write_text(json.dumps({"model": 1}))
    with pytest.raises(Exception, match="not a context manifest"):
        one.manifest("ctx-1")
    one.delete("ctx-1")
    assert one.ids() == [] and not (tmp_path / "contexts" / "ctx-1").exists()


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden", "x" * 200, "ctx-1\n"])
def test_ids_that_are_paths_are_refused(tmp_path, name) -> None:
    assert not valid_id(name)
    with pytest.raises(ValueError):
        StateDir(tmp_path, "replica-a", 30).acquire(name)


def test_writable_says_why_not(tmp_path) -> None:
    store = StateDir(tmp_path, "replica-a", 30)
    assert store.writable() is None
    store.root = tmp_path / "gone" / "deeper"
    (tmp_path / "gone").write_text("a file, not a folder")
    assert store.writable() is not None
