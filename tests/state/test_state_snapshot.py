"""Snapshots: save -> restore -> continue gives `==` logits; every damaged, foreign or newer
file is refused before a page is allocated. And the model fingerprint and its cache."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay.errors import ContextOverflow, SnapshotCorrupt, SnapshotMismatch
from llamay.paths import llamay_home
from llamay.state.fingerprint import CACHE_NAME, file_fingerprint

from helpers.snapshot_file import rebuilt, sections

SYNTH = Path(__file__).parent.parent / "data" / "synth"
QWEN2 = SYNTH / "qwen2-Q8_0.gguf"
TOKENS = [(7 + 37 * i) % 2000 + 3 for i in range(40)]


def load(path: Path = QWEN2, **options) -> llamay.engine.Model:
    return llamay.load(path, threads=1, n_ctx=256, page_tokens=16, **options)


@pytest.fixture(scope="module")
def model() -> llamay.engine.Model:
    return load()


@pytest.fixture
def saved(model, tmp_path) -> Path:
    with model.context() as ctx:
        ctx.feed(TOKENS)
        ctx.save(tmp_path / "ctx.kv")
    return tmp_path / "ctx.kv"


def test_save_restore_continue_is_exact(model, saved):
    other = load()  # a separate instance: nothing shared but the file
    ctx = other.restore(saved)
    assert ctx.tokens == TOKENS and len(ctx.pages) == 3
    with model.context() as cold:
        cold.feed(TOKENS)
        assert np.array_equal(ctx.logits(), cold.logits())
        ctx.feed([5, 6])
        cold.feed([5, 6])
        assert np.array_equal(ctx.logits(), cold.logits())


def test_an_empty_context_round_trips(model, tmp_path):
    with model.context() as ctx:
        ctx.save(tmp_path / "empty.kv")
    ctx = model.restore(tmp_path / "empty.kv")
    assert ctx.tokens == [] and ctx.pages == []


def test_a_note_travels_with_the_snapshot(model, saved, tmp_path):
    assert model.restore(saved).note is None
    note = {"messages": [{"role": "user", "content": "héllo"}], "held": "x"}
    with model.context() as ctx:
        ctx.feed(TOKENS)
        ctx.save(tmp_path / "noted.kv", note=note)
    restored = model.restore(tmp_path / "noted.kv")
    assert restored.note == note
    assert restored.tokens == TOKENS


def test_the_file_layout(model, saved):
    data = saved.read_bytes()
    assert struct.unpack_from("<8sII", data) == (b"LLAMAYKV", 1, 4)
    name, length, _ = struct.unpack_from("<4sQ32s", data, 16)
    meta = json.loads(data[60 : 60 + length])
    assert name == b"META"
    assert meta["fingerprint"] == model.fingerprint and meta["n_tokens"] == 40
    assert (meta["kv_dtype"], meta["page_tokens"], meta["n_pages"]) == ("F16", 16, 3)
    assert meta["llamay_version"] == llamay.__version__ and meta["kernels"] == model.kernels
    page_bytes = model.kv_stats()["bytes_per_page"]
    sizes = [len(data[60 : 60 + length]), 4 * 40, 4 * model.n_vocab, 3 * page_bytes]
    assert len(data) == 16 + 4 * 44 + sum(sizes)


def refused(model, path: Path, error: type, match: str) -> None:
    before = model.kv_stats()
    with pytest.raises(error, match=match):
        model.restore(path)
    assert model.kv_stats() == before


@pytest.mark.parametrize("cut", [0, 10, 16, 40, 200, -1])
def test_a_truncated_snapshot_is_refused(model, saved, cut):
    saved.write_bytes(saved.read_bytes()[:cut])
    refused(model, saved, SnapshotCorrupt, "too short|truncated")


@pytest.mark.parametrize("where", [70, 300, -5000, -1])
def test_a_flipped_byte_is_refused(model, saved, where):
    data = bytearray(saved.read_bytes())
    data[where] ^= 0x40
    saved.write_bytes(bytes(data))
    refused(model, saved, SnapshotCorrupt, "fails its checksum")


def test_a_bad_magic_or_trailing_bytes_are_refused(model, saved):
    data = saved.read_bytes()
    saved.write_bytes(b"GGUF" + data[4:])
    refused(model, saved, SnapshotCorrupt, "not a llamay snapshot")
    saved.write_bytes(data + b"\0")
    refused(model, saved, SnapshotCorrupt, "1 unexpected bytes after the last section")


def test_a_newer_format_is_refused_saying_so(model, saved):
    data = saved.read_bytes()
    saved.write_bytes(data[:8] + struct.pack("<I", 2) + data[12:])
    refused(model, saved, SnapshotCorrupt, "format version 2 is newer than this llamay")


def rewrite_meta(path: Path, drop: tuple[str, ...] = (), **changes) -> None:
    """Rewrites META with valid checksums, as a snapshot written elsewhere would be."""
    data = path.read_bytes()
    _, length, _ = struct.unpack_from("<4sQ32s", data, 16)
    meta = json.loads(data[60 : 60 + length]) | changes
    for key in drop:
        del meta[key]
    payload = json.dumps(meta).encode()
    header = struct.pack("<4sQ32s", b"META", len(payload), hashlib.sha256(payload).digest())
    path.write_bytes(data[:16] + header + payload + data[60 + length :])


def test_a_snapshot_of_other_weights_is_refused_naming_both(model, saved, tmp_path):
    qwen3 = load(SYNTH / "qwen3-Q8_0.gguf")
    refused(qwen3, saved, SnapshotMismatch, model.fingerprint)
    with pytest.raises(SnapshotMismatch, match=qwen3.fingerprint):
        qwen3.restore(saved)


def test_another_kv_layout_is_refused(saved):
    refused(load(kv_type="F32"), saved, SnapshotMismatch, r"kv_dtype F16 \(this model: F32\)")


def test_another_kernel_set_is_accepted(model, saved):
    rewrite_meta(saved, kernels="some-other-set")
    assert model.restore(saved).tokens == TOKENS


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_tokens": 49}, "49 tokens cannot fill 3 pages"),
        ({"n_tokens": "40"}, "'n_tokens' is missing or not a int"),
        ({"n_pages": 2, "n_tokens": 32}, "TOKS section does not hold 32"),
        ({"n_vocab": 7}, "7 tokens in the vocabulary"),
    ],
)
def test_inconsistent_metadata_is_refused(model, saved, changes, message):
    rewrite_meta(saved, **changes)
    refused(model, saved, SnapshotCorrupt, message)


def test_a_snapshot_longer_than_n_ctx_is_refused(saved):
    small = llamay.load(QWEN2, threads=1, n_ctx=32, page_tokens=16)
    refused(small, saved, ContextOverflow, "holds 40 tokens, more than n_ctx = 32")


def test_restore_into_a_full_kv_cache_allocates_nothing(saved):
    small = load(kv_memory=2 * 32768)
    refused(small, saved, ContextOverflow, "KV cache is full")


def rewrite_section(path: Path, name: bytes, transform) -> None:
    """Replaces one section's payload by transform(payload), checksum recomputed: a snapshot
    whose contents were altered by someone who knows the format."""
    data, at, out = path.read_bytes(), 16, bytearray(path.read_bytes()[:16])
    while at < len(data):
        section, length, _ = struct.unpack_from("<4sQ32s", data, at)
        payload = data[at + 44 : at + 44 + length]
        if section == name:
            payload = transform(payload)
        out += struct.pack("<4sQ32s", section, len(payload), hashlib.sha256(payload).digest())
        out += payload
        at += 44 + length
    path.write_bytes(bytes(out))


def poison(path: Path) -> None:
    """Scales every K and V of a snapshot (fp16) and its logits, keeping them finite."""
    rewrite_section(
        path, b"PAGE", lambda raw: (np.frombuffer(raw, "<f2") * np.float16(0.5)).tobytes()
    )
    rewrite_section(path, b"LOGT", lambda raw: (np.frombuffer(raw, "<f4")[::-1]).tobytes())


def test_a_restored_context_never_feeds_the_shared_prefix_tree(saved):
    """A snapshot is untrusted: its pages, what continues them and their forks stay private,
    so an altered snapshot cannot change what another context computes."""
    model = load()
    poison(saved)
    restored = model.restore(saved)
    assert not restored.trusted
    restored.feed(TOKENS[:30])  # fills more pages after the restored ones
    fork = restored.fork()
    fork.feed([5] * 20)
    assert not fork.trusted
    assert model.kv_stats()["pages_cached"] == 0
    with model.context() as victim, load().context() as cold:
        victim.feed(TOKENS)
        cold.feed(TOKENS)
        assert model.kv_stats()["prefix_hits"] == 0
        assert np.array_equal(victim.logits(), cold.logits())
    for ctx in (restored, fork):
        ctx.close()


def test_verify_recomputes_and_trusts_only_what_the_tokens_compute(model, saved, tmp_path):
    good = model.restore(saved, verify=True)
    assert good.trusted and good.tokens == TOKENS
    with model.context() as cold:
        cold.feed(TOKENS)
        assert np.array_equal(good.logits(), cold.logits())
    good.close()
    poison(saved)
    fresh = load()
    with pytest.raises(SnapshotCorrupt, match="not what these weights compute"):
        fresh.restore(saved, verify=True)
    # what is left is the recompute's two full pages, the model's own work, in the prefix tree
    stats = fresh.kv_stats()
    assert stats["pages_used"] == stats["pages_cached"] == 2


def test_non_finite_kv_or_logits_are_refused(model, saved):
    data = saved.read_bytes()
    rewrite_section(saved, b"PAGE", lambda raw: np.full(len(raw) // 2, np.inf, "<f2").tobytes())
    refused(model, saved, SnapshotCorrupt, "non-finite K or V")
    saved.write_bytes(data)
    rewrite_section(saved, b"LOGT", lambda raw: np.full(len(raw) // 4, np.nan, "<f4").tobytes())
    refused(model, saved, SnapshotCorrupt, "non-finite logit")


def test_another_backends_snapshot_is_refused_naming_both(model, saved):
    reference = load(backend="reference")
    refused(reference, saved, SnapshotMismatch, r"cpu backend \(determinism class 'cpu-2'\)")
    with pytest.raises(SnapshotMismatch, match="runs on the reference backend"):
        reference.restore(saved)
    data = saved.read_bytes()
    meta = json.loads(data[60 : 60 + struct.unpack_from("<4sQ", data, 16)[1]])
    assert (meta["backend"], meta["determinism"]) == ("cpu", "cpu-2")
    rewrite_meta(saved, backend="cuda", determinism="cuda-sm90")
    refused(model, saved, SnapshotMismatch, "cuda backend")


def test_a_snapshot_of_an_older_cpu_arithmetic_is_refused(model, saved):
    """A build before the attention rework wrote class 'cpu', and one older still no class."""
    rewrite_meta(saved, determinism="cpu")
    refused(model, saved, SnapshotMismatch, r"determinism class 'cpu'\).*class 'cpu-2'")
    rewrite_meta(saved, drop=("determinism",))
    refused(model, saved, SnapshotMismatch, r"determinism class 'cpu'\).*class 'cpu-2'")


def test_a_deeply_nested_note_is_refused_not_a_crash(model, saved):
    rewrite_section(saved, b"META", lambda raw: raw[:-1] + b', "note": ' + b"[" * 100000 + b"}")
    refused(model, saved, SnapshotCorrupt, "not JSON")


def test_save_is_atomic_and_leaves_no_temporary_file(model, saved, tmp_path):
    assert [p.name for p in tmp_path.iterdir()] == ["ctx.kv"]
    with model.context() as ctx:
        ctx.feed([1, 2])
        ctx.save(saved)  # replaces the old snapshot whole
    assert model.restore(saved).tokens == [1, 2]


def test_the_fingerprint_is_the_file_sha256_and_is_cached():
    expected = hashlib.sha256(QWEN2.read_bytes()).hexdigest()
    assert file_fingerprint(QWEN2) == expected
    cache = json.loads((llamay_home() / CACHE_NAME).read_text())
    assert list(cache.values()) == [expected]
    key = next(iter(cache))
    cache[key] = "f" * 64  # the cache is trusted while the file's identity is unchanged
    (llamay_home() / CACHE_NAME).write_text(json.dumps(cache))
    assert file_fingerprint(QWEN2) == "f" * 64


def test_a_changed_file_is_hashed_again(tmp_path):
    copy = tmp_path / "m.gguf"
    copy.write_bytes(b"one")
    first = file_fingerprint(copy)
    copy.write_bytes(b"two!")
    assert file_fingerprint(copy) != first
    (llamay_home() / CACHE_NAME).write_text("not json")
    assert file_fingerprint(copy) == hashlib.sha256(b"two!").hexdigest()


# --- a snapshot is untrusted ---------------------------------------------------------------------

OTHER = [(11 + 53 * i) % 2000 + 3 for i in range(40)]  # another 40 tokens: other K/V


def forged(model, tmp_path) -> Path:
    """A snapshot that says TOKENS but holds the K/V and logits of OTHER, checksums valid: what
    a client who wants other contexts' answers changed would upload."""
    with model.context() as ctx:
        ctx.feed(OTHER)
        ctx.save(tmp_path / "other.kv")
    data = (tmp_path / "other.kv").read_bytes()
    tokens = np.asarray(TOKENS, dtype="<i4").tobytes()
    path = tmp_path / "forged.kv"
    path.write_bytes(rebuilt(data, TOKS=tokens))
    return path


def cold_logits(tokens: list[int]) -> np.ndarray:
    with load(prefix_cache=False) as cold, cold.context() as ctx:
        ctx.feed(tokens)
        return ctx.logits()


def test_a_restored_snapshots_pages_never_reach_other_contexts(tmp_path):
    model = load()
    path = forged(model, tmp_path)
    model.kv_cache.clear_prefix_cache()
    restored = model.restore(path)
    assert restored.tokens == TOKENS and not restored.trusted
    assert model.kv_stats()["pages_cached"] == 0
    # Neither its forks nor what is computed after its pages go into the tree either.
    child = restored.fork()
    child.feed(list(range(3, 30)))
    assert not child.trusted and model.kv_stats()["pages_cached"] == 0
    # Another context of the same tokens computes them: the cold logits, not the forged ones.
    with model.context() as victim:
        victim.feed([*TOKENS, 9])
        assert np.array_equal(victim.logits(), cold_logits([*TOKENS, 9]))
    child.close()
    restored.close()


def test_a_verified_restore_recomputes_and_then_shares(model, saved):
    before = model.kv_stats()
    model.kv_cache.clear_prefix_cache()
    ctx = model.restore(saved, verify=True)
    assert ctx.trusted and ctx.tokens == TOKENS
    assert np.array_equal(ctx.logits(), cold_logits(TOKENS))
    assert model.kv_stats()["pages_cached"] == len(TOKENS) // model.page_tokens
    ctx.close()
    model.kv_cache.clear_prefix_cache()
    assert model.kv_stats()["pages_used"] == before["pages_used"] - before["pages_cached"]


def test_a_verified_restore_refuses_a_forged_snapshot_keeping_nothing(tmp_path):
    model = load()
    path = forged(model, tmp_path)
    model.kv_cache.clear_prefix_cache()
    with pytest.raises(SnapshotCorrupt, match="page 0: not what these weights compute"):
        model.restore(path, verify=True)
    model.kv_cache.clear_prefix_cache()
    assert model.kv_stats()["pages_used"] == 0
    # Forged logits alone (the pages left true) are caught too.
    genuine = tmp_path / "genuine.kv"
    with model.context() as ctx:
        ctx.feed(TOKENS)
        ctx.save(genuine)
    logits = np.frombuffer(sections(genuine.read_bytes())[b"LOGT"], "<f4").copy()
    logits[[1, 2]] = logits[[2, 1]]
    genuine.write_bytes(rebuilt(genuine.read_bytes(), LOGT=logits.tobytes()))
    with pytest.raises(SnapshotCorrupt, match="the logits: not what"):
        model.restore(genuine, verify=True)


@pytest.mark.parametrize("section", ["PAGE", "LOGT"])
def test_non_finite_values_are_refused(model, saved, section):
    data = saved.read_bytes()
    if section == "PAGE":
        values = np.frombuffer(sections(data)[b"PAGE"], "<f2").copy()
        values[5] = np.nan
    else:
        values = np.frombuffer(sections(data)[b"LOGT"], "<f4").copy()
        values[5] = np.inf
    saved.write_bytes(rebuilt(data, **{section: values.tobytes()}))
    before = model.kv_stats()["pages_used"]
    with pytest.raises(SnapshotCorrupt, match="non-finite"):
        model.restore(saved)
    assert model.kv_stats()["pages_used"] == before


def test_a_deeply_nested_note_is_refused_not_a_recursion_error(model, saved):
    data = saved.read_bytes()
    meta = sections(data)[b"META"]
    deep = meta[:-1] + b', "note": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    saved.write_bytes(rebuilt(data, META=deep))
    with pytest.raises(SnapshotCorrupt, match="not JSON"):
        model.restore(saved)


# A save held inside its atomic write (after the bytes, before the fsync and the rename), until
# its parent kills it or lets it go on.
_HELD_SAVE = """
import os, sys
import llamay
model = llamay.load(sys.argv[1], threads=1, n_ctx=256, page_tokens=16)
ctx = model.context()
ctx.feed([5, 6, 7])
model.fingerprint  # its cache written now, not in the save
def held(fd):
    print("writing", flush=True)
    sys.stdin.read()
os.fsync = held
ctx.save(sys.argv[2])
"""


def _held_save(target: Path) -> subprocess.Popen:
    saver = subprocess.Popen(
        [sys.executable, "-c", _HELD_SAVE, str(QWEN2), str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=target.parent,  # the installed package, not the source tree
    )
    assert saver.stdout.readline() == "writing\n"
    return saver


def _partials(folder: Path) -> set[Path]:
    return set(folder.glob(".*.partial"))


def test_a_save_removes_what_killed_saves_of_its_target_left(model, saved, tmp_path):
    killed = _held_save(saved)
    left = _partials(tmp_path)
    assert len(left) == 1 and next(iter(left)).name.startswith(f".ctx.kv~{killed.pid}-")
    killed.kill()  # SIGKILL in the middle of the save: its temporary file stays behind
    killed.wait()
    # Another target's temporary file is not this save's to take, even a dead process's.
    foreign = tmp_path / f".ctx.kv.old~{killed.pid}-abc.partial"
    foreign.write_bytes(b"")
    running = _held_save(saved)
    try:
        alive = _partials(tmp_path) - left - {foreign}
        with model.context() as ctx:
            ctx.feed([1, 2])
            ctx.save(saved)
        assert _partials(tmp_path) == alive | {foreign}  # a running save's file stays
        assert model.restore(saved).tokens == [1, 2]
    finally:
        running.kill()
        running.wait()
