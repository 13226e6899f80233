"""`llamay run` routing a configured model name to a remote provider: a real HTTP upstream on
loopback (tests/upstream.py), then a second `llamay serve` as the upstream; and with no config,
proof that no connection leaves the machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from helpers.clitools import (
    LLAMAY,
    assert_user_error,
    default_sigint,
    interrupt_answer,
    run_llamay,
)
from helpers.upstream import start_upstream

QWEN2 = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"


@pytest.fixture
def upstream():
    server = start_upstream()
    yield server
    server.close()


def configure(base_url: str, api: str, models: str, key_env: str | None = None) -> Path:
    path = Path(os.environ["LLAMAY_HOME"]) / "config.toml"
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    path.write_text(
        f'[[providers]]\nname = "up"\napi = "{api}"\nbase_url = "{base_url}"\n{key}'
        f"models = {{ {models} }}\n"
    )
    return path


def configure_upstream(upstream, api: str = "openai") -> Path:
    base_url = upstream.url + ("/v1" if api == "openai" else "")
    return configure(base_url, api, '"remote-tiny" = "tiny:latest", "remote-broken" = "broken"')


# --- against the small upstream ------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_configured_name_is_answered_by_its_provider_streamed(upstream, api):
    configure_upstream(upstream, api)
    result = run_llamay(
        "run", "remote-tiny", "hello there", "-n", "3", "--temp", "0", "--system", "Be terse."
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "you said: hello"  # only the text; 3 words: the upstream's max_tokens
    assert "remote-tiny via provider 'up'" in result.stderr and "finish: length" in result.stderr
    body = upstream.requests[-1].body
    assert body["model"] == "tiny:latest" and body["stream"] is True
    assert body["max_tokens"] == 3 and body["temperature"] == 0
    assert "top_k" not in body and "top_p" not in body  # not given: the upstream's defaults
    user = {"role": "user", "content": "hello there"}
    if api == "openai":
        assert body["messages"] == [{"role": "system", "content": "Be terse."}, user]
    else:
        assert body["system"] == "Be terse." and body["messages"] == [user]


def test_the_key_goes_out_from_the_named_variable(upstream):
    upstream.key = "k-123"
    configure(upstream.url + "/v1", "openai", '"remote-tiny" = "m"', key_env="TEST_UP_KEY")
    result = run_llamay("run", "remote-tiny", "hi", env={**os.environ, "TEST_UP_KEY": "k-123"})
    assert result.returncode == 0, result.stderr
    assert upstream.requests[-1].headers["authorization"] == "Bearer k-123"
    unset = run_llamay("run", "remote-tiny", "hi")
    assert_user_error(unset, "$TEST_UP_KEY, which is not set")


def test_a_remote_chat_sends_the_whole_conversation_each_turn(upstream):
    configure_upstream(upstream, "anthropic")
    result = run_llamay(
        "run",
        "remote-tiny",
        stdin='hello\n/set temperature 0.5\n/set min_p 0.1\n"""\ntwo\nlines\n"""\n/show info\n',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "you said: hello\nyou said: two\nlines\n"
    first, second = (request.body for request in upstream.requests)
    assert "temperature" not in first and second["temperature"] == 0.5
    assert second["messages"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "you said: hello"},
        {"role": "user", "content": "two\nlines"},
    ]
    assert "min_p is not sent to anthropic providers" in result.stderr
    assert "upstream model  tiny:latest" in result.stderr


def _interrupted(args: list[str], stdin: bytes, then: bytes) -> subprocess.CompletedProcess:
    """Run `llamay ARGS`, typing `stdin`; once the answer has begun, Ctrl-C, then type `then`."""
    process = subprocess.Popen(
        [str(LLAMAY), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=default_sigint,
    )
    process.stdin.write(stdin)
    process.stdin.flush()
    # a chat goes on after it says so; a one-shot answer exits
    begun, said = interrupt_answer(process, stopped=b"(stopped: the answer is not kept)")
    process.stdin.write(then)
    process.stdin.close()
    process.wait(timeout=60)
    stdout, stderr = begun + process.stdout.read(), said + process.stderr.read()
    return subprocess.CompletedProcess(args, process.returncode, stdout.decode(), stderr.decode())


def test_ctrl_c_stops_a_remote_answer(upstream):
    configure(upstream.url + "/v1", "openai", '"remote-slow" = "slow"')
    once = _interrupted(["run", "remote-slow", "go on"], b"", b"")
    assert once.returncode == 130 and "finish: cancelled" in once.stderr
    assert "Traceback" not in once.stderr
    assert 0 < len(once.stdout) < len("you said: go on") * 200
    # In a chat the session goes on, without the stopped answer.
    chat = _interrupted(["run", "remote-slow"], b"go on\n", b"/set num_predict 2\nagain\n")
    assert chat.returncode == 0 and "(stopped: the answer is not kept)" in chat.stderr
    assert "Traceback" not in chat.stderr
    assert chat.stdout.endswith("\nyou said:\n")  # the next turn, two words long
    assert upstream.requests[-1].body["messages"] == [{"role": "user", "content": "again"}]


def test_local_only_flags_are_refused_for_a_remote_model(upstream):
    configure_upstream(upstream)
    for flags, named in (
        (["--grammar-file", __file__], "--grammar-file"),
        (["-c", "64"], "--ctx-size"),
        (["--top-k", "5"], "--top-k"),  # OpenAI's API has no top-k
    ):
        result = run_llamay("run", "remote-tiny", "hi", *flags)
        assert result.returncode == 2 and f"{named} applies to local models only" in result.stderr
    assert upstream.requests == []


def test_an_upstream_error_is_one_error_line_with_its_status_and_message(upstream):
    configure_upstream(upstream)
    result = run_llamay("run", "remote-broken", "hi")
    assert_user_error(result, "provider 'up'", "HTTP 500: the upstream broke")


def test_an_unreachable_upstream_is_one_error_line(upstream):
    url = upstream.url
    upstream.close()
    configure(url + "/v1", "openai", '"remote-tiny" = "m"')
    assert_user_error(run_llamay("run", "remote-tiny", "hi"), "cannot reach the upstream")


def test_a_bad_config_file_is_one_error_line_naming_it():
    path = configure("ftp://nowhere", "openai", '"m" = "m"')
    result = run_llamay("run", str(QWEN2), "hi")
    assert_user_error(result, str(path), "base_url must be an http:// or https:// URL")


# --- nothing leaves the machine ------------------------------------------------------------------

# Records every address the process resolves or connects to, one JSON line each.
_AUDIT = """
import json, os, sys

def _record(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        address = args[1] if event == "socket.connect" else args[:2]
        with open(os.environ["AUDIT_LOG"], "a") as log:
            log.write(json.dumps([event, repr(address)]) + "\\n")

sys.addaudithook(_record)
"""


def audited_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list]:
    hook = tmp_path / "audit"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(_AUDIT)
    log = tmp_path / "audit.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(hook), "AUDIT_LOG": str(log)}
    result = run_llamay(*args, env=env)
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, events


def test_without_a_config_no_connection_is_made(tmp_path, upstream):
    # The hook sees a provider's connection (to loopback here)...
    configure_upstream(upstream)
    routed, events = audited_run(tmp_path, "run", "remote-tiny", "hi")
    assert routed.returncode == 0, routed.stderr
    assert ["socket.connect", repr(("127.0.0.1", upstream.server.server_address[1]))] in events
    # ...and without the config file a local run makes none at all.
    (Path(os.environ["LLAMAY_HOME"]) / "config.toml").unlink()
    local, events = audited_run(tmp_path, "run", str(QWEN2), "Hello", "--temp", "0", "-n", "4")
    assert local.returncode == 0, local.stderr
    assert local.stdout and events == []


# --- a second `llamay serve` as the upstream ------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def llamay_upstream(tmp_path_factory, gemma_path):
    """`llamay serve` on a free loopback port, serving gemma3:270m, with a home of its own."""
    tmp_path = tmp_path_factory.mktemp("upstream")
    home = tmp_path / "upstream-home"
    home.mkdir()
    (home / "blobs").symlink_to(gemma_path.parent, target_is_directory=True)
    port = _free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - written while the server runs
    process = subprocess.Popen(
        [str(LLAMAY), "serve", "--port", str(port), "--ctx-size", "512"],
        env={**os.environ, "LLAMAY_HOME": str(home)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            if httpx.get(url + "/health", timeout=1).is_success:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
        time.sleep(0.1)
    yield url
    process.terminate()
    # SIGTERM drains first: a request still in flight may run the grace period (25 s) out
    process.wait(timeout=60)
    log.close()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_second_llamay_serve_answers_as_the_upstream(llamay_upstream, api, gemma_path):
    base_url = llamay_upstream + ("/v1" if api == "openai" else "")
    configure(base_url, api, '"far-gemma" = "gemma3:270m"')
    args = ("Name a colour.", "--temp", "0", "-n", "8")
    remote = run_llamay("run", "far-gemma", *args)
    local = run_llamay("run", "gemma3:270m", *args)
    assert remote.returncode == 0, remote.stderr
    assert local.returncode == 0, local.stderr
    # The same greedy answer, made by the other process and streamed back.
    assert remote.stdout == local.stdout != ""
    assert "far-gemma via provider 'up'" in remote.stderr
