"""Pulling from an Ollama-protocol registry on loopback (tests/registry_server.py): the manifest,
the bearer challenge, resuming with Range + If-Range, verification, and every failure leaving the
name unlisted."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import resource
import signal
import struct
import subprocess
import termios

import pytest

from llamay.errors import DigestMismatch, PullError
from llamay.store import list_models, model_info, pull, resolve_model
from llamay.store.builtin import PACKAGED
from llamay.store.manifests import MODEL, PARAMS, SYSTEM, TEMPLATE
from llamay.store.paths import blobs_dir, manifests_dir

from helpers.clitools import LLAMAY, assert_user_error, run_llamay
from helpers.registry_server import TOKEN, digest_of

PARAMS_JSON = {"stop": ["<|end|>", "User:"], "temperature": 0.2, "num_ctx": 128}


@pytest.fixture
def tiny_registry(registry, tiny_gguf):
    registry.add_ollama(
        "library",
        "tiny",
        "1",
        {
            MODEL: tiny_gguf,
            TEMPLATE: b"{{ .Prompt }}",
            SYSTEM: b"Be brief.",
            PARAMS: json.dumps(PARAMS_JSON).encode(),
        },
    )
    return registry


def stored_files() -> list[str]:
    """Every file in the store (lock files included: none should be left, but the store-wide
    lock's, which is never deleted: shared holders come and go)."""
    home = blobs_dir().parent
    files = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    return [name for name in files if name != "locks/store.lock"]


def test_pull_answers_the_bearer_challenge_and_keeps_the_layers(tiny_registry, tiny_gguf):
    tiny_registry.require_token = True
    events = []
    entry = pull(f"{tiny_registry.host}/library/tiny:1", insecure=True, progress=events.append)
    assert entry.name == f"{tiny_registry.host}/library/tiny:1"
    assert entry.path.read_bytes() == tiny_gguf
    assert entry.path.name == digest_of(tiny_gguf).replace(":", "-")
    assert (entry.family, entry.quant) == ("llama", "F32")
    assert entry.params == PARAMS_JSON
    assert (entry.template, entry.system) == ("{{ .Prompt }}", "Be brief.")
    assert entry.size == sum(
        layer["size"] for layer in [entry.manifest["config"], *entry.manifest["layers"]]
    )
    # The registry's own manifest, byte for byte, under manifests/HOST/NS/NAME/TAG.
    stored = manifests_dir() / tiny_registry.host / "library" / "tiny" / "1"
    served = (tiny_registry.root / "manifests" / "library" / "tiny" / "1").read_bytes()
    assert stored.read_bytes() == served
    # The first request met the challenge; every later one carried the realm's token.
    assert "authorization" not in tiny_registry.requests[0][2]
    assert tiny_registry.requests[1][1] == "/token"
    assert all(h["authorization"] == f"Bearer {TOKEN}" for _, _, h in tiny_registry.requests[2:])
    statuses = [event["status"] for event in events]
    assert statuses[0] == "pulling manifest"
    assert statuses[-2:] == ["writing manifest", "success"]
    model_events = [e for e in events if e.get("digest") == digest_of(tiny_gguf)]
    assert model_events[-1]["completed"] == model_events[-1]["total"] == len(tiny_gguf)
    assert [e.name for e in list_models()] == [entry.name]
    assert resolve_model(entry.name) == entry.path


def test_a_stored_blob_is_not_downloaded_again(tiny_registry):
    name = f"{tiny_registry.host}/library/tiny:1"
    pull(name, insecure=True)
    assert len(tiny_registry.blob_requests()) == 5
    tiny_registry.requests.clear()
    pull(name, insecure=True)
    assert [path for _, path, _ in tiny_registry.requests] == ["/v2/library/tiny/manifests/1"]


def test_a_dropped_connection_resumes_with_range(tiny_registry, tiny_gguf):
    model = digest_of(tiny_gguf)
    tiny_registry.drop_blobs = 1
    entry = pull(f"{tiny_registry.host}/library/tiny:1", insecure=True)
    assert entry.path.read_bytes() == tiny_gguf
    model_requests = [h for m, p, h in tiny_registry.requests if m == "GET" and p.endswith(model)]
    assert len(model_requests) == 2
    assert "range" not in model_requests[0]
    assert model_requests[1]["range"] == f"bytes={len(tiny_gguf) // 2}-"
    assert model_requests[1]["if-range"] == f'"{model[7:]}"'
    assert not list(blobs_dir().glob("*.partial*"))


def test_a_body_cut_short_without_a_length_resumes(tiny_registry, tiny_gguf):
    tiny_registry.omit_length = True
    tiny_registry.drop_blobs = 1
    entry = pull(f"{tiny_registry.host}/library/tiny:1", insecure=True)
    assert entry.path.read_bytes() == tiny_gguf
    ranges = [h.get("range") for h in tiny_registry.blob_requests()]
    assert ranges[:3] == [None, None, f"bytes={len(tiny_gguf) // 2}-"]  # config, model, rest


def test_an_interrupted_pull_resumes_at_the_next_pull(tiny_registry, tiny_gguf):
    name = f"{tiny_registry.host}/library/tiny:1"
    tiny_registry.drop_blobs = 1000
    with pytest.raises(PullError, match=r"kept failing.*pull again to resume"):
        pull(name, insecure=True)
    assert list_models() == []
    assert not (manifests_dir() / tiny_registry.host).exists()
    kept = list(blobs_dir().glob("*.partial"))
    assert [p.stat().st_size for p in kept] == [len(tiny_gguf) // 2]

    tiny_registry.drop_blobs = 0
    tiny_registry.requests.clear()
    entry = pull(name, insecure=True)
    assert entry.path.read_bytes() == tiny_gguf
    resumed = tiny_registry.blob_requests()[0]  # the config was stored the first time
    assert resumed["range"] == f"bytes={len(tiny_gguf) // 2}-"
    assert resumed["if-range"] == f'"{digest_of(tiny_gguf)[7:]}"'
    assert not list(blobs_dir().glob("*.partial*"))


def test_a_wrong_digest_stores_nothing(tiny_registry):
    tiny_registry.wrong_bytes = True
    with pytest.raises(DigestMismatch, match="expected sha256:"):
        pull(f"{tiny_registry.host}/library/tiny:1", insecure=True)
    assert list_models() == []
    assert stored_files() == []


def test_refusals(tiny_registry):
    host = tiny_registry.host
    with pytest.raises(PullError, match=r"not found .*answered 404"):
        pull(f"{host}/library/nope:1", insecure=True)
    with pytest.raises(PullError, match="needs --insecure"):
        pull(f"{host}/library/tiny:1")
    with pytest.raises(PullError, match="--insecure is only for"):
        pull("library/tiny:1", insecure=True)
    tiny_registry.require_token = True
    tiny_registry.refuse_tokens = True
    with pytest.raises(PullError, match=r"access denied.*401"):
        pull(f"{host}/library/tiny:1", insecure=True)
    assert list_models() == []
    assert stored_files() == []


def test_cli_pull_ls_show_run_rm(tiny_registry):
    name = f"{tiny_registry.host}/library/tiny:1"
    result = run_llamay("pull", name, "--insecure")
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")  # piped: quiet
    listing = run_llamay("ls").stdout.splitlines()
    assert listing[0].split() == ["NAME", "SIZE", "FAMILY", "QUANT", "MODIFIED"]
    assert listing[1].split()[:5] == [name, "159", "KB", "llama", "F32"]
    shown = run_llamay("show", name, "--json")
    assert json.loads(shown.stdout)["metadata"]["general.architecture"] == "llama"
    ran = run_llamay("run", name, "a b", "--raw", "-n", "4", "--temp", "0")
    assert ran.returncode == 0, ran.stderr
    assert "generated 4 tokens" in ran.stderr
    assert run_llamay("rm", name).returncode == 0
    assert list_models() == []
    assert stored_files() == []
    assert_user_error(run_llamay("rm", name), name)


def test_cli_draws_progress_bars_on_a_terminal(tiny_registry, tiny_gguf):
    pid, terminal = pty.fork()
    if pid == 0:  # the child: stderr is the terminal, 100 columns wide
        fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        os.execv(
            str(LLAMAY), ["llamay", "pull", f"{tiny_registry.host}/library/tiny:1", "--insecure"]
        )
    shown = b""
    with contextlib.suppress(OSError):  # EIO once the child has exited
        while chunk := os.read(terminal, 4096):
            shown += chunk
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, shown
    text = shown.decode()
    assert f"pulling {digest_of(tiny_gguf)[7:19]}: 100%" in text
    assert "155k/155k" in text
    assert text.rstrip().endswith(f"pulled {tiny_registry.host}/library/tiny:1")


def test_cli_failure_is_one_error_line(tiny_registry):
    tiny_registry.wrong_bytes = True
    result = run_llamay("pull", f"{tiny_registry.host}/library/tiny:1", "--insecure")
    assert_user_error(result, "expected sha256:", "deleted")
    listed = [line.split()[0] for line in run_llamay("ls").stdout.splitlines()[1:]]
    assert listed == sorted(PACKAGED)  # nothing stored: only the built-in names that load here


def test_two_concurrent_pulls_of_one_name_both_succeed(tiny_registry, tiny_gguf):
    name = f"{tiny_registry.host}/library/tiny:1"
    pulls = [
        subprocess.Popen([str(LLAMAY), "pull", name, "--insecure"], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for process in pulls:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    assert model_info(name).path.read_bytes() == tiny_gguf
    # The second found every blob stored: each was downloaded once.
    assert len(tiny_registry.blob_requests()) == 5


def test_a_full_disk_is_a_clear_error_and_leaves_nothing(tiny_registry, tiny_gguf):
    def small_file_limit():
        # Writes past 64 KiB fail (EFBIG, as ENOSPC on a full disk) instead of killing us.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    result = subprocess.run(
        [str(LLAMAY), "pull", f"{tiny_registry.host}/library/tiny:1", "--insecure"],
        capture_output=True,
        text=True,
        preexec_fn=small_file_limit,
        timeout=120,
    )
    assert_user_error(result, "no space left", "free some space")
    assert list_models() == []
    assert not list(blobs_dir().glob("*.partial*"))
    assert not (blobs_dir() / digest_of(tiny_gguf).replace(":", "-")).exists()
