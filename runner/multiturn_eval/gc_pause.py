"""The cyclic garbage collector paused while large acyclic data is built or read.

Loading a big suite, reading its fixtures or rendering a big run's reports allocates
hundreds of thousands of objects and no reference cycles; every allocation counts towards
a collection, and each full collection walks every object the run holds (half a suite's
load time, a fifth to a third of reading fixtures, tens of ms a report at 1,000 cases).
What such code leaves behind is freed by reference counting.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Pauses:
    lock = threading.Lock()
    count = 0
    """Blocks inside :func:`gc_paused` now, in any thread."""
    was_enabled = False
    """Whether the collector was on when the first of them began."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (the collector as it was after it).

    Blocks nest and may overlap in several threads (the interrupt writer renders reports
    while the run reads): the first one in pauses the collector, the last one out puts it
    back as the first one found it."""
    with _Pauses.lock:
        if _Pauses.count == 0:
            _Pauses.was_enabled = gc.isenabled()
            gc.disable()
        _Pauses.count += 1
    try:
        yield
    finally:
        with _Pauses.lock:
            _Pauses.count -= 1
            if _Pauses.count == 0 and _Pauses.was_enabled:
                gc.enable()


def with_gc_paused(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run inside :func:`gc_paused` (a decorator)."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with gc_paused():
            return function(*args, **kwargs)

    return wrapper
