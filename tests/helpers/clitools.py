"""Running the real `llamay` console script, as a user does, for the CLI tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers.waiting import wait_until

# The console script installed beside this interpreter (by `pip install .` or `pip install -e .`).
LLAMAY = Path(sys.executable).parent / "llamay"


def run_llamay(
    *args: str, stdin: str | None = None, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`llamay ARGS...`, capturing text output. The working directory is left as it is: the
    console script never imports from it (unlike `python -m`, which would see the source tree)."""
    return subprocess.run(
        [str(LLAMAY), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 1 with exactly one line `error: ...` on stderr, naming each fragment; no traceback."""
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def default_sigint() -> None:
    """Popen's preexec_fn for a child that a test interrupts: SIGINT back to its default, so
    that Python turns it into KeyboardInterrupt even where the test runner ignores SIGINT (as
    pytest-xdist's workers do, and a child inherits)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_answer(
    process: subprocess.Popen, stopped: bytes, timeout: float = 120
) -> tuple[bytes, bytes]:
    """Ctrl-C once `process` (stdout and stderr piped, started with default_sigint) has begun
    to answer, then wait until its stderr says `stopped` or it exits, so that what is typed
    next reaches it after the interrupt. Returns the answer's first byte and the stderr read
    so far; both pipes are left blocking, for the rest."""
    os.set_blocking(process.stdout.fileno(), False)
    os.set_blocking(process.stderr.fileno(), False)
    begun = wait_until(lambda: process.stdout.read(1), timeout, "the answer did not begin")
    process.send_signal(signal.SIGINT)
    said = bytearray()

    def ended() -> bool:
        said.extend(process.stderr.read() or b"")
        return stopped in said or process.poll() is not None

    wait_until(ended, timeout, "Ctrl-C did not end the answer")
    os.set_blocking(process.stdout.fileno(), True)
    os.set_blocking(process.stderr.fileno(), True)
    return begun, bytes(said)
