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
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (the collector as it was after it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def with_gc_paused(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run inside :func:`gc_paused` (a decorator)."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with gc_paused():
            return function(*args, **kwargs)

    return wrapper
