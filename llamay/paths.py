"""Where llamay keeps its files, and the one way it writes one: temp file, fsync, rename.

Everything lives under $LLAMAY_HOME (default ~/.llamay): the model store (store/paths.py names
its folders), the fingerprint cache, the chat history. This module sits at the bottom of the
package, beside errors.py, so that any layer may write a file without importing the store.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# Temporary files and folders carry the id of the process that makes them ("~PID-"), so that
# what a killed process left behind can be told from what a running one is still writing
# (store/prune.py cleans the stale ones, and every atomic write those of its own target).
_OWNER = re.compile(r"~(\d+)-")
# What a process of an older llamay left unmarked is stale after this long.
_UNMARKED_STALE_S = 3600.0


def temp_prefix(stem: str) -> str:
    """The prefix of a temporary file or folder this process makes: `stem`, then its id."""
    return f"{stem}~{os.getpid()}-"


def temp_owner(name: str) -> int | None:
    """The id of the process that made temporary file or folder `name` (None: not marked)."""
    match = _OWNER.search(name)
    return int(match.group(1)) if match else None


def stale(path: Path) -> bool:
    """Whether temporary file or folder `path` was left by a process that is gone (one with no
    process id in its name: once it is an hour old)."""
    owner = temp_owner(path.name)
    if owner is None:
        with contextlib.suppress(OSError):
            return time.time() - path.lstat().st_mtime > _UNMARKED_STALE_S
        return False
    return not alive(owner)


def alive(pid: int) -> bool:
    """Whether a process `pid` runs (another user's counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none by that number
        return False
    except PermissionError:  # another user's
        return True
    return True


def remove_stale_partials(target: Path) -> list[Path]:
    """Removes the temporary files of atomic writes of `target` (write_atomically's
    `.NAME~PID-XXXX.partial` beside it) whose process was killed before it could rename or
    remove them; returns them. A live process's file stays: it may be renaming it now."""
    target = Path(target)
    # Exactly this target's: the name of another target may begin with this one's.
    own = re.compile(re.escape(f".{target.name}") + r"~(\d+)-[^~]*\.partial")
    removed = []
    for path in target.parent.glob(f".{glob.escape(target.name)}~*.partial"):
        match = own.fullmatch(path.name)
        if match is not None and not alive(int(match.group(1))):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    return removed


def llamay_home() -> Path:
    return Path(os.environ.get("LLAMAY_HOME") or Path.home() / ".llamay")


def write_atomically(target: Path, fill: Callable[[BinaryIO], None]) -> None:
    """Write `target` through `fill(file)` so that readers see the old file or the whole new one.

    The data goes to a temporary file in the same directory, is fsynced, then renamed over the
    target; on any error the temporary file is removed and the target is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=temp_prefix(f".{target.name}"), suffix=".partial", dir=target.parent
    )
    try:
        with os.fdopen(fd, "wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
