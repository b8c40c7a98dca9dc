"""A move this controller began: what the snapshot tells the next decision and the plan
tells the relay's memory. Pure."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Leaving"]


class Leaving(NamedTuple):
    """A move off a worker (its mirror is being deleted): which worker, why, and whether
    it leaves after a worker-side failure there (steps/worker_failures.py)."""

    cluster: str
    why: str
    worker_failure: bool = False
