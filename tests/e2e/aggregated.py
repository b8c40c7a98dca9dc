"""The aggregated API on the local fleet: waiting for it, users to call it as, raw calls.

Shared by the modules that go through the manager's aggregation layer
(test_remote_logs.py, test_panel_api.py, test_dashboard_browser.py).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import API_SERVICES
from jobrelay.localfleet import pki
from jobrelay.localfleet.cluster import write_kubeconfig
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.e2e.support import ControllerProcess
from tests.kubetools import eventually

# The flags that make a test module's controller serve and register the API.
API_ARGS = ["--api-address", "127.0.0.1:0", "--api-register"]


def available(service: dict[str, Any]) -> bool:
    conditions = (service.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


async def api_available(controller: ControllerProcess, fleet: FleetHandle) -> dict[str, str]:
    """The controller's own address (``url``) and serving CA (``ca``, the APIService's
    caBundle), once the aggregator marks the APIService Available."""
    listening = [r for r in controller.run_records() if r.get("event") == "api-listening"]
    assert listening, "the controller logged no API address"
    url = listening[-1]["url"]
    async with fleet.client("manager") as manager:

        async def registered() -> dict[str, Any] | None:
            try:
                found = await manager.get(API_SERVICES, API_SERVICE_NAME)
            except ApiError as error:
                if error.is_not_found:
                    return None
                raise
            done = any(r.get("event") == "api-registered" for r in controller.run_records())
            return found if done and available(found) else None

        service = await eventually(registered, timeout=60, what="the APIService Available")
    return {"url": url, "ca": base64.b64decode(service["spec"]["caBundle"]).decode()}


def user_kubeconfig(fleet: FleetHandle, directory: Path, user: str) -> Path:
    """A kubeconfig of ``user``, known to the manager by a client certificate of its CA,
    whom no RoleBinding names (beyond what every authenticated user may do)."""
    ca = pki.CertPair(fleet.state_dir / "pki" / "ca.crt", fleet.state_dir / "pki" / "ca.key")
    identity = pki.issue(ca, directory, user, common_name=user, organization="nobody")
    admin = yaml.safe_load(fleet.kubeconfig("manager").read_text())
    path = directory / f"{user}.kubeconfig"
    write_kubeconfig(path, cluster="manager", server=admin["clusters"][0]["cluster"]["server"],
                     ca=ca.cert, client=identity)  # fmt: skip
    return path


async def manager_client(
    kubeconfig: Path, *, http2: bool = False, timeout: float = 30
) -> httpx2.AsyncClient:
    """An HTTP client of the manager's apiserver as the kubeconfig's user (a token or a
    client certificate); ``http2``: its requests share one connection."""
    config = yaml.safe_load(await asyncio.to_thread(kubeconfig.read_text))
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    headers = {}
    if "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    else:
        context.load_cert_chain(user["client-certificate"], user["client-key"])
    return httpx2.AsyncClient(base_url=cluster["server"], verify=context, timeout=timeout,
                              headers=headers, http2=http2)  # fmt: skip


async def manager_get(kubeconfig: Path, path: str, **params: str) -> httpx2.Response:
    """One GET on the manager's apiserver as the kubeconfig's user."""
    async with await manager_client(kubeconfig) as http:
        return await http.get(path, params=params)


async def webhook_in_force(
    manager: ApiClient,
    resource: Resource,
    namespace: str,
    probe: dict[str, Any],
    defaulted: Callable[[dict[str, Any]], bool],
) -> None:
    """Until a dry-run create of ``probe`` in ``namespace`` comes back ``defaulted``: the
    apiserver loads a new webhook configuration, and a namespace's new labels, through
    informers, so a create just after either may still pass by the webhook."""

    async def in_force() -> bool:
        try:
            made = await manager.create(resource, probe, namespace=namespace, dry_run=True)
        except ApiError:
            return False  # refused meanwhile (failurePolicy Fail): not yet
        return defaulted(made)

    await eventually(in_force, timeout=30, what="the managedBy webhook in force")
