"""Workers registered the way docs/add-a-worker.md tells operators to.

A module that sets ``WORKERS_ADDED = "service-account"`` gets its ``relay_fleet``'s
workers registered with `jobrelay clusters add NAME --kubeconfig ADMIN
--create-service-account` before its controller starts (tests/e2e/conftest.py): the
controller then reaches each worker only with the token of the least-privilege
ServiceAccount made there. They are registered with their admin kubeconfigs again when
the module ends, as the fleet's other modules expect. ``WORKER_KINDS`` in the module
(``Kind.version.group``, as `jobrelay run --kind`) are the kinds the account may run.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterable, Iterator

from tests.conftest import FleetHandle

__all__ = ["FLEET_LABEL", "SERVICE_ACCOUNT", "added_with_service_accounts", "clusters_add"]

SERVICE_ACCOUNT = "service-account"
FLEET_LABEL = "fleet.jobrelay.dev/local=true"  # what `fleet up` registers workers with


def clusters_add(fleet: FleetHandle, worker: str, *extra: str) -> str:
    """`jobrelay clusters add WORKER` from its admin kubeconfig; its output (fails on a
    non-zero exit)."""
    done = subprocess.run(
        [sys.executable, "-m", "jobrelay", "clusters", "add", worker,
         "--kubeconfig", str(fleet.kubeconfig(worker)), "--label", FLEET_LABEL,
         "--manager-kubeconfig", str(fleet.kubeconfig("manager")), *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"clusters add {worker} exited {done.returncode}:\n{output}"
    return output


@contextlib.contextmanager
def added_with_service_accounts(
    fleet: FleetHandle, kinds: Iterable[str] = ()
) -> Iterator[FleetHandle]:
    """Every worker of ``fleet`` registered with --create-service-account while in use,
    its account granted ``kinds`` (``Kind.version.group``, as `jobrelay run --kind`;
    none: the default, Jobs)."""
    # Named even for the default: without --kind, `clusters add` takes the kinds a
    # controller's Lease records, and an earlier module's may still be there.
    kind_args = [arg for kind in tuple(kinds) or ("Job.v1.batch",) for arg in ("--kind", kind)]
    try:
        for worker in fleet.workers:
            clusters_add(fleet, worker, "--create-service-account", *kind_args)
        yield fleet
    finally:
        for worker in fleet.workers:
            clusters_add(fleet, worker)
