"""Where the store lives, and the one way llamay writes a file: temp file, fsync, rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def llamay_home() -> Path:
    return Path(os.environ.get("LLAMAY_HOME") or Path.home() / ".llamay")


def blobs_dir() -> Path:
    path = llamay_home() / "blobs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomically(target: Path, fill: Callable[[BinaryIO], None]) -> None:
    """Write `target` through `fill(file)` so that readers see the old file or the whole new one.

    The data goes to a temporary file in the same directory, is fsynced, then renamed over the
    target; on any error the temporary file is removed and the target is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
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
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
