"""What the manager must offer before anything starts: a Kubernetes jobrelay supports
(its ``/version``, ``kube/supported_versions.py``), and the CRDs the controller's caches
need (WorkerCluster, RelayQueue), applied with ``--install-crds`` or else checked."""

from __future__ import annotations

from jobrelay.controller.kind_resolution import ConfigurationError
from jobrelay.controller.options import ControllerOptions
from jobrelay.fleet import relayqueues, workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CLUSTER_PROFILES, RELAY_QUEUES, WORKER_CLUSTERS
from jobrelay.kube.supported_versions import too_old

__all__ = [
    "MISSING_CRD",
    "MISSING_PROFILE_CRD",
    "MISSING_QUEUE_CRD",
    "check_manager",
    "ensure_crds",
]

MISSING_QUEUE_CRD = workerclusters.missing_crd(RELAY_QUEUES) + ", or run with --install-crds"
MISSING_CRD = workerclusters.missing_crd(WORKER_CLUSTERS) + ", or run with --install-crds"
MISSING_PROFILE_CRD = (
    "--cluster-profiles: the management cluster serves no ClusterProfile "
    "(clusterprofiles.multicluster.x-k8s.io/v1alpha1): install the CRD of "
    "sigs.k8s.io/cluster-inventory-api (your cluster manager's), or run without --cluster-profiles"
)


async def check_manager(manager: ApiClient, options: ControllerOptions) -> None:
    """Refuse, in one line, a manager older than jobrelay supports; then the CRDs."""
    problem = too_old(await manager.version())
    if problem:
        raise ConfigurationError(problem)
    await ensure_crds(manager, options)


async def ensure_crds(manager: ApiClient, options: ControllerOptions) -> None:
    """The CRDs the caches need (WorkerCluster, RelayQueue): applied with
    --install-crds, else checked."""
    try:
        if options.install_crds:
            await workerclusters.install_crd(manager)
            await workerclusters.install_crd(manager, manifest=relayqueues.crd_manifest())
        elif not await workerclusters.crd_served(manager):
            raise ConfigurationError(MISSING_CRD)
        elif not await workerclusters.crd_served(manager, RELAY_QUEUES):
            raise ConfigurationError(MISSING_QUEUE_CRD)
        # Never installed by jobrelay: the cluster manager that writes the profiles owns it.
        if options.workers.cluster_profiles and not await workerclusters.crd_served(
            manager, CLUSTER_PROFILES
        ):
            raise ConfigurationError(MISSING_PROFILE_CRD)
    except workerclusters.RegistryError as error:
        raise ConfigurationError(str(error)) from error
    except ApiError as error:
        if not (options.install_crds and error.code == 403):
            raise
        raise ConfigurationError(
            f"--install-crds: may not apply jobrelay's CRDs ({error.message}): apply "
            f"{workerclusters.CRD_FILES} as a cluster admin and run without --install-crds"
        ) from error
