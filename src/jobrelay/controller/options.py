"""Everything an operator can tune about the controller, with its default."""

from __future__ import annotations

from dataclasses import dataclass

from jobrelay.fleet.registry import DEFAULT_NAMESPACE
from jobrelay.jobs.naming import DEFAULT_CONTROLLER_NAME


@dataclass(frozen=True)
class ControllerOptions:
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # Where WorkerCluster kubeconfig Secrets live (and, later, the leader Lease).
    namespace: str = DEFAULT_NAMESPACE
    # Names the management cluster in the mirrors' origin annotation.
    origin: str = "manager"
    # Create a Job's namespace on the worker when it is missing there.
    create_namespaces: bool = True
    # Keep finished mirrors on the workers (for debugging); by default they are
    # deleted once their final status has been copied.
    keep_finished_mirrors: bool = False
    # Every this many seconds all known keys are reconciled again from the caches
    # (no API reads): a safety net that bounds how long an orphaned mirror can live.
    gc_interval: float = 60.0
    # Reconciles running at once; each is I/O-bound.
    concurrency: int = 16
    # How long start-up waits for workers to list their mirrors before dispatching.
    worker_sync_timeout: float = 20.0
    # Retry pacing for Jobs that cannot be placed or whose mirror a worker rejects.
    unplaceable_retry: float = 15.0
    rejected_retry: float = 30.0
