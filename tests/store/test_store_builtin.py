"""`gemma3:270m` resolves with no network, assembled once and atomically into the store."""

from __future__ import annotations

import hashlib

import pytest

from llamay.errors import ModelNotFound
from llamay.paths import write_atomically
from llamay.store import resolve_model
from llamay.store.builtin import GEMMA3_270M, PackagedModel, packaged_model_path


@pytest.mark.slow
def test_assembles_once_into_an_empty_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMAY_HOME", str(tmp_path / "home"))
    path = resolve_model("gemma3:270m")
    assert path.parent == tmp_path / "home" / "blobs"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == GEMMA3_270M.sha256
    mtime = path.stat().st_mtime_ns
    assert resolve_model("gemma3:270m") == path
    assert path.stat().st_mtime_ns == mtime  # found, not rebuilt
    # No temp files left; the sha256 is remembered by file identity, so that a use hashes the
    # file again only once it has changed.
    assert sorted(p.name for p in path.parent.iterdir()) == [".verified.json", path.name]


def test_missing_chunk_package_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMAY_HOME", str(tmp_path))
    ghost = PackagedModel(
        name="ghost:1b",
        file_name="ghost.gguf",
        sha256="0" * 64,
        size=1,
        chunk_packages=(("no_such_chunk_package_part1", "ghost.part00"),),
        install_hint="pip install 'llamay[ghost]'",
        family="llama",
        quant="Q4_K_M",
    )
    with pytest.raises(ModelNotFound, match=r"no-such-chunk-package-part1.*llamay\[ghost\]"):
        packaged_model_path(ghost)


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def fail(out):
        out.write(b"partial")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_atomically(target, fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


@pytest.mark.slow
def test_a_damaged_built_in_file_is_assembled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMAY_HOME", str(tmp_path / "home"))
    path = resolve_model("gemma3:270m")
    path.chmod(0o644)
    with open(path, "r+b") as damaged:  # one flipped byte, as a disk or a careless edit makes
        damaged.seek(1000)
        byte = damaged.read(1)
        damaged.seek(1000)
        damaged.write(bytes([byte[0] ^ 1]))
    assert resolve_model("gemma3:270m") == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == GEMMA3_270M.sha256
