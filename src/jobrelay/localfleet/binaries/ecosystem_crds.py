"""The real CRDs of the ecosystem's batch kinds the e2e tests dispatch (RayJob and
RayCluster, TrainJob, PyTorchJob, MPIJob v2beta1), read out of their Go module zips and
kept as one JSON file, so that the apiservers judge every object jobrelay writes as they
would in a real fleet (their managedBy rules included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root
from jobrelay.localfleet.binaries.chart_crds import crds_from_zip
from jobrelay.localfleet.binaries.gomodule import download_module, find_go
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

# (module, version, the CRD files in its zip): plain CustomResourceDefinitions.
ECOSYSTEM_CRD_SOURCES = (
    (
        KUBERAY_MODULE,
        KUBERAY_VERSION,
        ("config/crd/bases/ray.io_rayjobs.yaml", "config/crd/bases/ray.io_rayclusters.yaml"),
    ),
    (TRAINER_MODULE, TRAINER_VERSION, ("manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",)),
    (
        TRAINING_OPERATOR_MODULE,
        TRAINING_OPERATOR_VERSION,
        # Only PyTorchJob: this module's MPIJob is kubeflow.org/v1 and would clash with the
        # MPI operator's v2beta1 (one CRD per name).
        ("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",),
    ),
    (MPI_OPERATOR_MODULE, MPI_OPERATOR_VERSION, ("manifests/base/kubeflow.org_mpijobs.yaml",)),
)


def ecosystem_crds_path() -> Path:
    tag = "-".join(version for _module, version, _files in ECOSYSTEM_CRD_SOURCES)
    return cache_root() / "crds" / f"ecosystem-crds-{tag}.json"


def ecosystem_crds(progress: Progress, *, build: bool) -> Path:
    """The JSON file (a list) of the ecosystem's CRDs, downloading them through the Go
    module proxy when missing and ``build``."""
    destination = ecosystem_crds_path()
    if destination.is_file():
        return destination
    if not build:
        raise BinaryError(
            f"the ecosystem's CRDs (KubeRay, Kubeflow) are not in {destination.parent} yet: "
            "run `jobrelay fleet build`"
        )
    with build_lock():
        if not destination.is_file():
            go = find_go("the ecosystem's CRDs", "nothing: they come from the Go module proxy")
            workspace = cache_root() / "build" / "ecosystem-crds"
            workspace.mkdir(parents=True, exist_ok=True)
            crds: list[Any] = []
            for module, version, files in ECOSYSTEM_CRD_SOURCES:
                progress(f"downloading the CRDs of {module}@{version} ...")
                info = download_module(go, module, version, workspace)
                crds += crds_from_zip(Path(info["Zip"]), module, version, files)
            destination.parent.mkdir(parents=True, exist_ok=True)
            temporary = destination.with_suffix(".tmp")
            temporary.write_text(json.dumps(crds, separators=(",", ":")))
            temporary.replace(destination)
    return destination


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
