"""Finding and calling the controller's HTTPS API (remote logs, mirror view) as the user.

The controller publishes where its API is and the CA that signs it in the
ConfigMap ``jobrelay-system/jobrelay-api`` (keys ``address``, ``ca.crt``);
the user's own manager credentials read it and go along to the API, which
checks them against the manager. ``--server`` overrides the address.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kube.api import CONFIGMAPS, ApiClient, ApiError, KubeconfigError
from jobrelay.kube.userclient import RelayClient, RelayError

__all__ = [
    "API_CONFIGMAP",
    "Endpoint",
    "RelayError",
    "connect",
    "fetch_mirror",
    "find_endpoint",
    "job_path",
]

API_CONFIGMAP = "jobrelay-api"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    ca_pem: str | None


async def find_endpoint(
    kubeconfig: str | Path | None,
    context: str | None,
    *,
    server: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    ca_pem: str | None = None,
) -> Endpoint:
    """Where the API is (``server`` or the published address) and the CA to trust
    (``ca_pem``, else the published one).

    RelayError(404, "NotPublished") when nothing is published and no server given.
    """
    if server and ca_pem:
        return Endpoint(server, ca_pem)
    try:
        manager = (
            ApiClient.from_kubeconfig(kubeconfig, context, cluster="manager")
            if kubeconfig
            else ApiClient.from_environment(context, cluster="manager")
        )
    except KubeconfigError as error:
        raise RelayError(0, "Kubeconfig", str(error)) from None
    async with manager:
        try:
            configmap = await manager.get(CONFIGMAPS, API_CONFIGMAP, namespace=namespace)
        except ApiError as error:
            if server:  # the address is given; the CA may still be the system's
                return Endpoint(server, None)
            if error.is_not_found:
                raise RelayError(
                    404, "NotPublished",
                    f"no ConfigMap {namespace}/{API_CONFIGMAP}: is `jobrelay run` serving its "
                    "API (--api-address)? Or pass --server",
                ) from None  # fmt: skip
            raise RelayError(error.code, error.reason, f"reading {namespace}/{API_CONFIGMAP}: "
                             f"{error.message}") from None  # fmt: skip
    data = configmap.get("data") or {}
    address = server or str(data.get("address") or "")
    if not address:
        raise RelayError(404, "NotPublished", f"{namespace}/{API_CONFIGMAP} has no address")
    return Endpoint(address, str(data.get("ca.crt") or "") or None)


@contextlib.asynccontextmanager
async def connect(
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    *,
    server: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    ca_pem: str | None = None,
) -> AsyncIterator[RelayClient]:
    endpoint = await find_endpoint(
        kubeconfig, context, server=server, namespace=namespace, ca_pem=ca_pem
    )
    try:
        client = RelayClient.for_user(
            endpoint.url, endpoint.ca_pem, kubeconfig=kubeconfig, context=context
        )
    except KubeconfigError as error:
        raise RelayError(0, "Kubeconfig", str(error)) from None
    try:
        yield client
    finally:
        await client.aclose()


def job_path(namespace: str, name: str, what: str) -> str:
    return f"/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}/{what}"


async def fetch_mirror(
    namespace: str,
    name: str,
    kind: str = "Job",
    *,
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    server: str | None = None,
) -> dict[str, Any]:
    """``{cluster, mirror, pods: [{name, phase, node, restarts, ready, lastState, conditions}]}``
    of a placed workload, as the controller sees it on its worker; RelayError when refused
    (401, 403, 404 with reason NotFound, NotPlaced; 503 WorkerUnavailable)."""
    async with connect(kubeconfig, context, server=server) as client:
        return await client.get_json(job_path(namespace, name, "mirror"), {"kind": kind})


def log_params(options: Mapping[str, Any]) -> dict[str, str]:
    """The API's query from `jobrelay logs` options (None and False left out)."""
    names = {
        "kind": "kind", "container": "container", "index": "index", "all_pods": "allPods",
        "previous": "previous", "tail": "tailLines", "since": "sinceSeconds",
        "timestamps": "timestamps", "follow": "follow",
    }  # fmt: skip
    params: dict[str, str] = {}
    for option, param in names.items():
        value = options.get(option)
        if value is None or value is False or value == "":
            continue
        params[param] = "true" if value is True else str(value)
    return params
