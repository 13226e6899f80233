"""The docs' commands, run as written, so that the quickstart cannot rot.

A fenced block in docs/*.md preceded by `<!-- runnable -->` is run: a `sh` block by bash
(`set -euo pipefail`), a `python` block by this environment's interpreter, in an empty working
directory, with this test's $LLAMAY_HOME (conftest: fresh, the model blobs shared) and this
environment's `llamay` first on PATH. It must exit 0 and print something. Whatever a block
leaves running (`llamay serve &`) is ended with its process group.

A `sh` block must say which it is: `<!-- runnable -->` or `<!-- not-runnable: why -->` (the
network, a benchmark's minutes...). A line that installs llamay (`pip install`) runs only with
LLAMAY_DOCS_INSTALL=1, which runs each such block in a fresh clone of this repository instead:
the test suite itself runs inside that install, and building the core again takes minutes.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!--\s*(runnable|not-runnable:\s*\S.*?)\s*-->$")
SHELL = {"sh", "bash", "shell", "console"}
# Pages whose bodies other work is rewriting as this lands; their shell blocks
# are held to the marker rule once they carry markers of their own.
UNMARKED_FOR_NOW = {"deploy.md"}
INSTALL = re.compile(r"\bpip install\b")
SERVER_PORT = 11435
TIMEOUT = 600  # seconds per block; a block normally takes a few


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, from 1
    lang: str
    marker: str | None  # "runnable", "not-runnable: why", or None
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown text, each with the marker on the line before it."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        before = lines[i - 1].strip() if i else ""
        marker = MARKER.match(before)
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence.group(1)):
            end += 1
        found.append(
            Block(
                page,
                i + 1,
                fence.group(2).lower(),
                marker.group(1) if marker else None,
                "\n".join(lines[i + 1 : end]) + "\n",
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for page in sorted(DOCS.glob("*.md")) for b in blocks(page.read_text(), page.name)]


RUNNABLE = [b for b in all_blocks() if b.marker == "runnable"]


def run(block: Block, cwd: Path, env: dict[str, str], install: bool) -> tuple[int, str, str]:
    """Runs a block; returns (exit status, stdout, stderr). Output goes to files, not pipes,
    so that a server the block leaves running cannot hold the test open."""
    if block.lang in SHELL:
        script = "".join(
            line + "\n" if install or not INSTALL.search(line) else ": install line skipped\n"
            for line in block.text.splitlines()
        )
        argv = ["bash", "-c", "set -euo pipefail\n" + script]
    elif block.lang == "python":
        argv = [sys.executable, "-c", block.text]
    else:
        raise AssertionError(
            f"{block.id}: a runnable block must be sh or python, not {block.lang!r}"
        )
    out_path, err_path = cwd / ".block.out", cwd / ".block.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            status = proc.wait(timeout=TIMEOUT)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    return status, out_path.read_text(errors="replace"), err_path.read_text(errors="replace")


def environment(install: bool) -> dict[str, str]:
    env = dict(os.environ)
    if not install:
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    return env


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_runnable_block(block: Block, tmp_path):
    install = os.environ.get("LLAMAY_DOCS_INSTALL") == "1" and bool(INSTALL.search(block.text))
    if "llamay serve" in block.text and port_in_use(SERVER_PORT):
        pytest.skip(f"port {SERVER_PORT}, which the block serves on, is in use on this machine")
    cwd = tmp_path / "work"
    if install:
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(cwd)], check=True)
    else:
        cwd.mkdir()
    status, out, err = run(block, cwd, environment(install), install)
    assert status == 0, f"{block.id} exited {status}\n--- stdout\n{out}\n--- stderr\n{err}"
    assert out.strip(), f"{block.id} printed nothing\n--- stderr\n{err}"


def test_the_quickstart_is_three_runnable_commands():
    first = next(b for b in RUNNABLE if b.page == "quickstart.md")
    commands = [line for line in first.text.splitlines() if line.strip()]
    assert len(commands) == 3
    assert INSTALL.search(commands[0]) and "'.[gemma]'" in commands[0]
    assert commands[1].startswith("llamay pull ") and commands[2].startswith("llamay run ")


def test_every_shell_block_says_whether_it_runs():
    unmarked = [
        b.id
        for b in all_blocks()
        if b.lang in SHELL and b.marker is None and b.page not in UNMARKED_FOR_NOW
    ]
    assert unmarked == [], "mark these <!-- runnable --> or <!-- not-runnable: why -->"


def test_the_runner_fails_a_failing_block_and_ends_what_it_left_running(tmp_path):
    failing = Block("t.md", 1, "sh", "runnable", "echo partial\nfalse\necho never\n")
    status, out, _ = run(failing, tmp_path, environment(False), install=False)
    assert status != 0 and out == "partial\n"
    pid_file = tmp_path / "sleeper.pid"
    leaving = Block("t.md", 1, "sh", "runnable", f"sleep 300 &\necho $! > {pid_file}\necho ok\n")
    assert run(leaving, tmp_path, environment(False), install=False)[:2] == (0, "ok\n")
    sleeper = int(pid_file.read_text())
    wait_until(  # reparented and reaped by init once killed
        lambda: _state(sleeper) in ("gone", "Z"), 60, f"the block's `sleep 300` ({sleeper}) runs on"
    )


def test_install_lines_are_skipped_unless_asked(tmp_path):
    block = Block("t.md", 1, "sh", "runnable", "pip install nothing-such-exists-here\necho ran\n")
    assert run(block, tmp_path, environment(False), install=False)[:2] == (0, "ran\n")


def test_markers_and_fences_are_parsed():
    text = "x\n<!-- runnable -->\n```sh\na\nb\n```\n<!-- not-runnable: needs the network -->\n```sh\nc\n```\n```python\nd\n```\n"
    found = blocks(text, "p.md")
    assert [(b.line, b.lang, b.marker, b.text) for b in found] == [
        (3, "sh", "runnable", "a\nb\n"),
        (8, "sh", "not-runnable: needs the network", "c\n"),
        (11, "python", None, "d\n"),
    ]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
