"""cluster-autoscaler's ProvisioningRequest CRD, read out of its Go module zip
(``k8s.io/autoscaler/cluster-autoscaler/apis``) and kept as a JSON file in the cache, for
the local fleet's workers that run the stand-in autoscaler.

The zip the proxy serves holds the CRD of ``v1beta1`` only. The newer CRD serves ``v1``
(the storage version) beside a deprecated ``v1beta1`` with the same schema, the only
change being that ``podTemplateRef.name`` is required; :func:`served_as_v1` makes that
CRD out of the older one, so that the fleet's apiservers judge requests as a current
cluster-autoscaler installation does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import cache_root
from jobrelay.localfleet.binaries.chart_crds import cached_crds
from jobrelay.localfleet.binaries.versions import AUTOSCALER_APIS_MODULE, AUTOSCALER_APIS_VERSION
from jobrelay.vocabulary.provisioning_api import CRD_NAME, PROVISIONING_REQUESTS

AUTOSCALER_CRD_SOURCES = (
    (
        AUTOSCALER_APIS_MODULE,
        AUTOSCALER_APIS_VERSION,
        (f"config/crd/{PROVISIONING_REQUESTS.group}_{PROVISIONING_REQUESTS.plural}.yaml",),
    ),
)


def autoscaler_crds_path() -> Path:
    return cache_root() / "crds" / f"autoscaler-crds-{AUTOSCALER_APIS_VERSION}.json"


def autoscaler_crds(progress: Progress, *, build: bool) -> Path:
    """The JSON file (a list) holding the ProvisioningRequest CRD as the module zip has it,
    downloading it through the Go module proxy when missing and ``build``."""
    return cached_crds(
        progress, build=build, destination=autoscaler_crds_path(),
        sources=AUTOSCALER_CRD_SOURCES, what="cluster-autoscaler's ProvisioningRequest CRD",
        workspace="autoscaler-crds",
    )  # fmt: skip


def load_provisioning_request_crd(path: Path) -> dict[str, Any]:
    """The ProvisioningRequest CRD, served as ``v1``, from a file ``autoscaler_crds`` wrote;
    one clear error if it is not that."""
    try:
        crds = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise BinaryError(f"{path}: not cluster-autoscaler's CRDs: {error}") from error
    found = [
        crd
        for crd in (crds if isinstance(crds, list) else ())
        if isinstance(crd, dict)
        and crd.get("kind") == "CustomResourceDefinition"
        and (crd.get("metadata") or {}).get("name") == CRD_NAME
    ]
    if not found:
        raise BinaryError(f"{path}: holds no {CRD_NAME} CustomResourceDefinition")
    return served_as_v1(found[0])


def served_as_v1(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD serving ``v1`` (storage) and a deprecated ``v1beta1`` with one schema, as
    cluster-autoscaler's current CRD does; a CRD that serves ``v1`` already is returned
    unchanged. Only ``metadata.name`` of the original metadata is kept (an apply body)."""
    versions = crd["spec"]["versions"]
    if any(version.get("name") == "v1" for version in versions):
        return crd
    beta = next(version for version in versions if version.get("name") == "v1beta1")
    current = copy.deepcopy(beta)
    current["name"] = "v1"
    current["storage"] = True
    current["served"] = True
    pod_set = current["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["podSets"]
    pod_set["items"]["properties"]["podTemplateRef"]["required"] = ["name"]
    deprecated = copy.deepcopy(beta)
    deprecated.update(
        storage=False,
        served=True,
        deprecated=True,
        deprecationWarning=f"{PROVISIONING_REQUESTS.group}/v1beta1 API is deprecated",
    )
    return {
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {"name": crd["metadata"]["name"]},
        "spec": {**crd["spec"], "versions": [current, deprecated]},
    }
