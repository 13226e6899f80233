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


class StepGate:
    """Lets a model's scheduler run only the forward steps a test allows, so that a test can
    act between two tokens without racing the scheduler thread (which otherwise runs ahead
    of the caller, as far as max_tokens). Used as a context manager on a loaded model."""

    def __init__(self, model: Any, steps: int = 0) -> None:
        self._model = model
        self._allowed = threading.Semaphore(steps)

    def allow(self, steps: int = 1) -> None:
        for _ in range(steps):
            self._allowed.release()

    def open(self) -> None:
        """Every later step runs freely."""
        self.allow(1_000_000)

    def __enter__(self) -> StepGate:
        real = self._model.forward_batch

        def gated(*args: Any, **kwargs: Any) -> Any:
            self._allowed.acquire()
            return real(*args, **kwargs)

        self._model.forward_batch = gated
        return self

    def __exit__(self, *exc: object) -> None:
        self.open()
        del self._model.forward_batch  # the class's method again
