"""The local fleet's autoscaled workers (a worker with ``autoscaler:`` in the fleet
configuration): cluster-autoscaler's ProvisioningRequest CRD installed there, served as v1,
and the stand-in autoscaler's command line (``jobrelay.localfleet.autoscaler``), started by
the fleet once the CRD is served and stopped by its PID with the rest of the fleet."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS
from jobrelay.localfleet.autoscaler_field import AutoscalerShape
from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.autoscaler_crds import (
    autoscaler_crds,
    load_provisioning_request_crd,
)
from jobrelay.vocabulary.provisioning_api import PROVISIONING_REQUESTS

AUTOSCALER = "autoscaler"  # the component's name in the fleet's records and logs
FIELD_MANAGER = "jobrelay-fleet"
CRD_SERVED_TIMEOUT = 60.0


def provisioning_crd(progress: Progress) -> dict[str, Any]:
    """The CRD, fetched through the Go module proxy into the cache the first time."""
    return load_provisioning_request_crd(autoscaler_crds(progress, build=True))


def autoscaler_command(kubeconfig: Path, cluster: str, shape: AutoscalerShape) -> list[str]:
    return [
        sys.executable, "-m", "jobrelay.localfleet.autoscaler",
        f"--kubeconfig={kubeconfig}", f"--cluster={cluster}", *shape.flags(),
    ]  # fmt: skip


async def install_provisioning_crd(client: ApiClient, crd: dict[str, Any]) -> None:
    """Server-side apply the CRD (idempotent), then wait until discovery serves it."""
    await client.patch(
        CRDS, crd["metadata"]["name"], crd, patch_type=PatchType.APPLY,
        field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CRD_SERVED_TIMEOUT
    while True:
        try:
            served = await client.discover(
                PROVISIONING_REQUESTS.group, PROVISIONING_REQUESTS.version
            )
        except ApiError as error:
            if not error.is_not_found:
                raise
            served = []
        if any(found.get("name") == PROVISIONING_REQUESTS.plural for found in served):
            return
        if loop.time() > deadline:
            raise BinaryError(
                f"{client.cluster}: {PROVISIONING_REQUESTS.name} not served within "
                f"{CRD_SERVED_TIMEOUT:.0f}s of installing its CRD"
            )
        await asyncio.sleep(0.2)
