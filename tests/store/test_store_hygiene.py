"""What the store must not keep or trust: blobs nothing uses, unfinished downloads and temporary
files of killed processes (`llamay prune`, and at `llamay serve`), damaged blobs (`llamay ls
--verify`, and every pull), and names too long to store (refused before a byte is fetched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

from llamay.errors import ModelNotFound, PullError
from llamay.paths import llamay_home, temp_prefix
from llamay.store import import_blob, list_models, pull, resolve_model
from llamay.store.blobs import blob_path
from llamay.store.builtin import PACKAGED
from llamay.store.locks import store_lock
from llamay.store.paths import blobs_dir
from llamay.store.prune import (
    clean_stale_temporaries,
    pending_uploads,
    prune,
    prune_uploads,
    track_upload,
)

from helpers.clitools import assert_user_error, run_llamay
from helpers.registry_server import digest_of


def dead_pid() -> int:
    """The id of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_prune_removes_what_no_name_uses_and_keeps_the_rest(registry, tiny_gguf, tmp_path):
    source = tmp_path / "kept.gguf"
    source.write_bytes(tiny_gguf)
    kept = pull(str(source))
    orphan = import_blob(
        digest_of(b"an upload never made into a model"), [b"an upload never made into a model"]
    )
    partial = blobs_dir() / f"sha256-{'1' * 64}.partial"
    partial.write_bytes(b"half a download")
    (blobs_dir() / f"{partial.name}.validator").write_text('"etag"')
    stale = blobs_dir() / f".import~{dead_pid()}-abc.partial"
    stale.write_bytes(b"what a killed upload left")

    dry = prune(dry_run=True)
    assert dry.blobs == [orphan] and orphan.exists()
    done = prune()
    assert done.blobs == [orphan] and not orphan.exists()
    assert not partial.exists() and stale in done.temporaries and not stale.exists()
    assert done.freed >= len(b"an upload never made into a model") + len(b"half a download")
    assert kept.path.exists() and [e.name for e in list_models()] == [kept.name]


def test_prune_waits_for_no_pull_it_would_race(tmp_path):
    # A pull or upload at work holds the store lock shared.
    with store_lock(exclusive=False), pytest.raises(PullError, match="a pull or upload is running"):
        prune()
    assert prune().blobs == []


def test_stale_temporaries_of_dead_processes_go_and_live_ones_stay(tmp_path):
    mine = blobs_dir() / f"{temp_prefix('.import')}live.partial"
    mine.write_bytes(b"being written")
    dead = llamay_home() / f".fingerprints.json~{dead_pid()}-x.partial"
    dead.write_bytes(b"{")
    folder = tempfile.mkdtemp(prefix=f"llamay-snapshot~{dead_pid()}-")
    (open(os.path.join(folder, "ctx.llamay"), "wb")).close()
    removed = clean_stale_temporaries()
    assert dead in removed and not dead.exists()
    assert not os.path.exists(folder)
    assert mine.exists()
    mine.unlink()


def test_uploads_are_bounded_and_expire_unless_a_model_uses_them(tmp_path):
    old = import_blob(digest_of(b"old upload"), [b"old upload"])
    track_upload(digest_of(b"old upload"))
    assert [(d, size) for d, size, _ in pending_uploads()] == [(digest_of(b"old upload"), 10)]
    assert prune_uploads(older_than=3600) == []  # not old enough yet
    uploads = json.loads((llamay_home() / "uploads.json").read_text())
    uploads[digest_of(b"old upload")] = time.time() - 7200
    (llamay_home() / "uploads.json").write_text(json.dumps(uploads))
    assert prune_uploads(older_than=3600) == [digest_of(b"old upload")]
    assert not old.exists() and pending_uploads() == []


def test_ls_verify_finds_a_damaged_blob_and_pull_repairs_it(tmp_path, tiny_gguf):
    source = tmp_path / "model.gguf"
    source.write_bytes(tiny_gguf)
    entry = pull(str(source))
    ok = run_llamay("ls", "--verify")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0].split()[-1] == "STATUS"
    assert ok.stdout.splitlines()[1].split()[-1] == "ok"
    stored = blob_path(entry.manifest["layers"][0]["digest"])
    stored.unlink()  # a hard link to source: give the store its own, damaged copy
    stored.write_bytes(tiny_gguf[:-1] + bytes([tiny_gguf[-1] ^ 1]))
    damaged = run_llamay("ls", "--verify")
    assert damaged.stdout.splitlines()[1].split()[-1] == "damaged"
    assert_user_error(damaged, str(source), "pull again to repair")
    pull(str(source))  # finds the blob stored, hashes it, takes the file again
    assert stored.read_bytes() == tiny_gguf
    assert run_llamay("ls", "--verify").returncode == 0


@pytest.mark.slow
def test_ls_verify_checks_the_builtin_model_assembled_without_a_pull():
    # (This home's blobs are its own: the shared model file is never touched.)
    assembled = resolve_model("gemma3:270m")  # from the installed package, no manifest written
    rows = {
        line.split()[0]: line.split()[-1]
        for line in run_llamay("ls", "--verify").stdout.splitlines()[1:]
    }
    assert rows == dict.fromkeys(PACKAGED, "ok")
    size = assembled.stat().st_size
    assembled.chmod(0o644)
    with open(assembled, "r+b") as model_file:  # one byte flipped, the size kept
        model_file.seek(size // 2)
        byte = model_file.read(1)
        model_file.seek(size // 2)
        model_file.write(bytes([byte[0] ^ 1]))
    assert assembled.stat().st_size == size
    damaged = run_llamay("ls", "--verify")
    assert {line.split()[-1] for line in damaged.stdout.splitlines()[1:]} == {"damaged"}
    assert_user_error(damaged, "gemma3:270m", "pull again to repair")
    pull("gemma3:270m")  # assembled again from the package
    assert run_llamay("ls", "--verify").returncode == 0


def test_a_url_too_long_to_store_is_refused_before_it_is_fetched(registry, tiny_gguf):
    digest = registry.add_blob(tiny_gguf)
    url = f"{registry.endpoint}/files/{digest}/{'m' * 300}.gguf"
    registry.requests.clear()
    with pytest.raises(ModelNotFound, match="too long to be stored"):
        pull(url)
    assert registry.requests == []
    assert [p.name for p in blobs_dir().iterdir()] == []
    result = run_llamay("pull", url)
    assert_user_error(result, "too long to be stored")


def test_cli_prune_lists_what_it_removes(tmp_path):
    orphan = import_blob(digest_of(b"orphan"), [b"orphan"])
    result = run_llamay("prune", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(orphan)]
    assert "would free 6 B" in result.stderr
    assert run_llamay("prune").returncode == 0 and not orphan.exists()
