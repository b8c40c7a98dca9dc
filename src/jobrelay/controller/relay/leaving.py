"""A move this controller began: what the snapshot tells the next decision and the plan
tells the relay's memory. Pure."""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["Leaving", "WorkerFailure"]


class WorkerFailure(enum.Enum):
    """Why a workload leaves a worker for the worker's fault (steps/worker_failures.py)."""

    # Its pods cannot run there (kinds/pod_faults.py): an image, a container's set-up,
    # an eviction.
    FAULT = "fault"
    # Its pods stayed unschedulable there past --pending-timeout while another fits.
    PENDING = "pending"


class Leaving(NamedTuple):
    """A move off a worker (its mirror is being deleted): which worker, why, and the
    worker-side failure it leaves after (None: a drain, a lost worker, a preemption)."""

    cluster: str
    why: str
    worker_failure: WorkerFailure | None = None
