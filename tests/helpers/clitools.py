"""Running the real `llamay` console script, as a user does, for the CLI tests."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

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
