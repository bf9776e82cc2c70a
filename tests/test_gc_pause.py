"""``gc_paused``: the collector off inside every block, back as it was after the last one,
whatever the nesting and however blocks of several threads overlap."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from multiturn_eval.gc_pause import gc_paused, with_gc_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_blocks_nest_and_an_exception_leaves_the_collector_as_it_was() -> None:
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), gc_paused():
        raise KeyError("x")
    assert gc.isenabled()

    @with_gc_paused
    def inside() -> bool:
        return gc.isenabled()

    assert inside() is False and gc.isenabled()
    gc.disable()  # off before: off after
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_blocks_of_two_threads_keep_it_off_until_the_last_one_leaves() -> None:
    """Thread A enters, B enters, A leaves (B is still inside: off), B leaves (on again)."""
    steps = [threading.Event() for _ in range(3)]
    seen: list[bool] = []

    def b() -> None:
        with gc_paused():
            steps[0].set()
            steps[1].wait(5)
            seen.append(gc.isenabled())  # A has left; this block is still open
        steps[2].set()

    thread = threading.Thread(target=b)
    with gc_paused():
        thread.start()
        steps[0].wait(5)
    steps[1].set()
    steps[2].wait(5)
    thread.join(5)
    assert seen == [False]
    assert gc.isenabled()


def test_many_threads_entering_and_leaving_leave_it_on() -> None:
    def loop() -> None:
        for _ in range(2000):
            with gc_paused():
                pass

    threads = [threading.Thread(target=loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert gc.isenabled()
