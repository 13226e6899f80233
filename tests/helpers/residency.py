"""What of the CPU backend's KV page memory is in RAM: mincore over a group's bytes, and whether
this machine's transparent huge pages are on at all."""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np
import pytest

from llamay._core.pages import PageMemory

SMALL_PAGE = 4096
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident_bytes(memory: PageMemory, group: int) -> int:
    """Bytes of a group's memory in RAM (mincore, 4 KB at a time)."""
    start = memory.k_view(group * memory.group_pages, 0).ctypes.data
    length = memory.group_pages * memory.page_bytes
    assert start % SMALL_PAGE == 0 and length % SMALL_PAGE == 0
    vec = (ctypes.c_ubyte * (length // SMALL_PAGE))()
    assert LIBC.mincore(start, length, vec) == 0, os.strerror(ctypes.get_errno())
    return SMALL_PAGE * int((np.frombuffer(vec, dtype=np.uint8) & 1).sum())


def _huge_pages_on() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore, madvise")
huge_pages = pytest.mark.skipif(not _huge_pages_on(), reason="transparent huge pages are off")
