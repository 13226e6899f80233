"""The barrier between a forward step's stages (csrc/barrier.h), which spins and then sleeps
whatever other OpenMP teams the process has; and a step run from a second thread, whose team
made libgomp's own barrier sleep at once, gives the same bits as from the first."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay._core import matmul as mm

QWEN2 = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_no_thread_passes_before_every_thread_arrived(threads):
    # three and four threads on a two-core machine: some wait while others are not running
    assert mm.barrier_check(threads, 2000) == 0


@pytest.mark.parametrize("threads", [2, 3])
def test_a_late_thread_wakes_the_sleepers(threads):
    # every seventh round one thread arrives a millisecond late, after the others fell asleep
    assert mm.barrier_check(threads, 200, sleep_every=7) == 0


def test_one_thread_never_waits():
    assert mm.barrier_check(1, 10_000) == 0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="barrier_check needs"):
        mm.barrier_check(0, 10)


def test_steps_from_two_threads_give_the_same_bits():
    model = llamay.load(QWEN2, threads=2, n_ctx=128)
    ids = [3 + 17 * i % 500 for i in range(40)]

    def run() -> np.ndarray:
        with model.context() as ctx:
            ctx.feed(ids[:24])
            rows = [ctx.logits()]
            for token in ids[24:]:
                ctx.feed([token])
                rows.append(ctx.logits())
            return np.stack(rows)

    here = run()  # this thread's team
    there: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: there.append(run()))  # a second team
    worker.start()
    worker.join()
    assert np.array_equal(here, there[0])
    assert np.array_equal(here, run())  # and here again, after the second team ran
