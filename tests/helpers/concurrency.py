"""Running calls at the same moment, each in its own thread: how tests put several generations
on one model's scheduler together."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


def all_at_once(call: Callable[[Any], Any], arguments: Sequence[Any]) -> list[Any]:
    """call(argument) for every argument, each in a thread, started together behind a barrier;
    the results in the order of the arguments."""
    results: list[Any] = [None] * len(arguments)
    barrier = threading.Barrier(len(arguments))

    def worker(i: int) -> None:
        barrier.wait()
        results[i] = call(arguments[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
