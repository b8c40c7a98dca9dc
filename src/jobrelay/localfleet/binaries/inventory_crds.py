"""The ClusterProfile CRD of sigs.k8s.io/cluster-inventory-api, read out of its Go module zip
and kept as a JSON file (a list) in the cache, as the ecosystem's CRDs are (ecosystem_crds.py):
the e2e tests of workers from ClusterProfiles install it on the manager, where a cluster
manager (OCM, GKE Fleet, ...) would have installed it."""

from __future__ import annotations

from pathlib import Path

from jobrelay.localfleet.binaries import Progress
from jobrelay.localfleet.binaries.build_cache import cache_root
from jobrelay.localfleet.binaries.chart_crds import cached_crds
from jobrelay.localfleet.binaries.versions import (
    CLUSTER_INVENTORY_MODULE,
    CLUSTER_INVENTORY_VERSION,
)

# (module, version, the CRD files in its zip): only ClusterProfile (no PlacementDecision).
INVENTORY_CRD_SOURCES = (
    (
        CLUSTER_INVENTORY_MODULE,
        CLUSTER_INVENTORY_VERSION,
        ("config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml",),
    ),
)


def inventory_crds_path() -> Path:
    return cache_root() / "crds" / f"cluster-inventory-crds-{CLUSTER_INVENTORY_VERSION}.json"


def inventory_crds(progress: Progress, *, build: bool) -> Path:
    """The JSON file (a list) holding the ClusterProfile CRD, downloaded through the Go
    module proxy when missing and ``build``."""
    return cached_crds(
        progress, build=build, destination=inventory_crds_path(),
        sources=INVENTORY_CRD_SOURCES, what="the ClusterProfile CRD (cluster-inventory-api)",
        workspace="inventory-crds",
    )  # fmt: skip
