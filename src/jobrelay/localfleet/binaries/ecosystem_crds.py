"""The real CRDs of the ecosystem's batch kinds the e2e tests dispatch (RayJob and
RayCluster, TrainJob, PyTorchJob, MPIJob v2beta1), read out of their Go module zips and
kept as one JSON file, so that the apiservers judge every object jobrelay writes as they
would in a real fleet (their managedBy rules included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobrelay.kinds.kubeflow import MPIJobKind, PyTorchJobKind
from jobrelay.kinds.ray import RayClusterKind, RayJobKind
from jobrelay.kinds.trainjob import TrainJobKind
from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import cache_root
from jobrelay.localfleet.binaries.chart_crds import cached_crds
from jobrelay.localfleet.binaries.versions import (
    KUBERAY_MODULE,
    KUBERAY_VERSION,
    MPI_OPERATOR_MODULE,
    MPI_OPERATOR_VERSION,
    TRAINER_MODULE,
    TRAINER_VERSION,
    TRAINING_OPERATOR_MODULE,
    TRAINING_OPERATOR_VERSION,
)
from jobrelay.vocabulary.resource import Resource


def _crd_file(directory: str, ref: Resource) -> str:
    """Where kubebuilder writes a kind's CRD: ``<directory>/<group>_<plural>.yaml``."""
    return f"{directory}/{ref.group}_{ref.plural}.yaml"


# (module, version, the CRD files in its zip): plain CustomResourceDefinitions.
ECOSYSTEM_CRD_SOURCES = (
    (
        KUBERAY_MODULE,
        KUBERAY_VERSION,
        tuple(_crd_file("config/crd/bases", kind.ref) for kind in (RayJobKind, RayClusterKind)),
    ),
    (TRAINER_MODULE, TRAINER_VERSION, (_crd_file("manifests/base/crds", TrainJobKind.ref),)),
    (
        TRAINING_OPERATOR_MODULE,
        TRAINING_OPERATOR_VERSION,
        # Only PyTorchJob: this module's MPIJob is kubeflow.org/v1 and would clash with the
        # MPI operator's v2beta1 (one CRD per name).
        (_crd_file("manifests/base/crds", PyTorchJobKind.ref),),
    ),
    (MPI_OPERATOR_MODULE, MPI_OPERATOR_VERSION, (_crd_file("manifests/base", MPIJobKind.ref),)),
)


def ecosystem_crds_path() -> Path:
    tag = "-".join(version for _module, version, _files in ECOSYSTEM_CRD_SOURCES)
    return cache_root() / "crds" / f"ecosystem-crds-{tag}.json"


def ecosystem_crds(progress: Progress, *, build: bool) -> Path:
    """The JSON file (a list) of the ecosystem's CRDs, downloading them through the Go
    module proxy when missing and ``build``."""
    return cached_crds(
        progress, build=build, destination=ecosystem_crds_path(),
        sources=ECOSYSTEM_CRD_SOURCES, what="the ecosystem's CRDs (KubeRay, Kubeflow)",
        workspace="ecosystem-crds",
    )  # fmt: skip


def load_ecosystem_crds(path: Path) -> list[dict[str, Any]]:
    """The CRDs of a file ``ecosystem_crds`` wrote; one clear error if it is not that."""
    try:
        crds = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise BinaryError(f"{path}: not the ecosystem's CRDs: {error}") from error
    if not isinstance(crds, list) or not all(
        isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition" for crd in crds
    ):
        raise BinaryError(f"{path}: not a list of CustomResourceDefinitions")
    return crds
