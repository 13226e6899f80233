"""Where llamay keeps its files, and the one way it writes one: temp file, fsync, rename.

Everything lives under $LLAMAY_HOME (default ~/.llamay): the model store (store/paths.py names
its folders), the fingerprint cache, the chat history. This module sits at the bottom of the
package, beside errors.py, so that any layer may write a file without importing the store.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def llamay_home() -> Path:
    return Path(os.environ.get("LLAMAY_HOME") or Path.home() / ".llamay")


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
    fsync_dir(target.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
