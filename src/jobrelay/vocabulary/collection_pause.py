"""The cyclic garbage collector paused over one synchronous burst of allocations.

An admission pass over a big held backlog makes hundreds of thousands of small objects
that live only until the pass ends, and its reference counts free them then. Left on,
the collector runs hundreds of times during the pass and, the survivors counting as
long-lived, a full collection over every cached object every pass or two
(`bench.held_backlog`: at 100,000 held, about a third of the pass). Paused, the objects
are freed as the pass's references go, and what stays is collected later as usual.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collection_paused"]


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside (for code without an ``await``: nothing else runs
    meanwhile); the collector is on again after it only if it was on before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
