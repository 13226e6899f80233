"""Waiting for something to happen: poll for it, with a deadline far past what it takes on a
loaded machine, rather than sleep a fixed time and hope (a sleep long enough for a busy machine
is wasted on a quiet one, and still too short on a busier one)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.05


def wait_until(condition: Callable[[], T], timeout: float, message: str) -> T:
    """Calls `condition` until it returns something true, and returns that; fails the test
    saying `message` if `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} (waited {timeout:g} s)")
        time.sleep(POLL_S)
    return result
