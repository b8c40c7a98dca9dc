"""The logs API's client: finds the API and calls it with the user's own credentials.

The controller publishes where its API is and the CA that signs it in the
ConfigMap ``jobrelay-system/jobrelay-api`` (keys ``address``, ``ca.crt``); the
user's own manager credentials read it and go along to the API, which checks
them against the manager. ``--server`` overrides the address.

The user's kubeconfig context says who they are (a bearer token, an exec
plugin's token, or a client certificate); the API's own certificate is trusted
from the CA it publishes, never from the kubeconfig.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube.config.client_adapter import user_auth, user_cert
from lightkube.config.kubeconfig import KubeConfig

from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import CONFIG_ERRORS
from jobrelay.kube.errors import ApiError, KubeconfigError
from jobrelay.kube.redact import library_problem
from jobrelay.kube.resources import CONFIGMAPS
from jobrelay.relayapi.rules import API_CONFIGMAP, RelayError, job_path, refusal

__all__ = [
    "Endpoint",
    "RelayClient",
    "RelayError",
    "connect",
    "fetch_mirror",
    "find_endpoint",
]


class RelayClient:
    """An HTTP client of the logs API that carries the user's own manager credentials."""

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http

    @classmethod
    def for_user(
        cls,
        url: str,
        ca_pem: str | None,
        *,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        timeout: float = 30.0,
    ) -> RelayClient:
        """A client of ``url`` with the credentials of the kubeconfig's ``context``
        (default: like kubectl), trusting ``ca_pem`` (None: the system's CAs)."""
        try:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
            single = config.get(context_name=context)
            tls = (
                ssl.create_default_context(cadata=ca_pem)
                if ca_pem
                else ssl.create_default_context()
            )
            cert = user_cert(single.user, single.abs_file) if single.user else None
            if cert:
                tls.load_cert_chain(*cert)
            auth = user_auth(single.user) if single.user else None
        except ssl.SSLError as exc:
            raise KubeconfigError(f"cannot load certificates: {exc.reason or exc}") from None
        except CONFIG_ERRORS as exc:
            raise KubeconfigError(f"cannot use the kubeconfig: {library_problem(exc)}") from None
        http = httpx2.AsyncClient(
            base_url=url,
            verify=tls,
            auth=auth,
            timeout=httpx2.Timeout(timeout, read=None),
            headers={"Accept": "application/json, text/plain"},
            trust_env=False,
        )
        return cls(http)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get_json(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        try:
            response = await self._http.get(path, params=dict(params))
        except httpx2.HTTPError as exc:
            raise RelayError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise refusal(response.status_code, response.content)
        found = response.json()
        if not isinstance(found, dict):
            raise RelayError(200, "InvalidResponse", "the answer is not a JSON object")
        return found

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """The body of ``path`` as it arrives; RelayError for a refusal."""
        request = self._http.build_request("GET", path, params=dict(params))
        try:
            response = await self._http.send(request, stream=True)
        except httpx2.HTTPError as exc:
            raise RelayError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        try:
            if response.status_code != 200:
                raise refusal(response.status_code, await response.aread())
            yield response.aiter_bytes()
        except httpx2.HTTPError as exc:
            raise RelayError(0, "Unreachable", f"the stream broke: {type(exc).__name__}") from None
        finally:
            await response.aclose()


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
            said = error.message
            if error.code == 0 and error.details.get("cause"):  # the manager does not answer
                said = (f"cannot connect to {error.details.get('server') or 'the manager'} "
                        f"({error.details['cause']}): check --kubeconfig and --context")  # fmt: skip
            raise RelayError(error.code, error.reason, f"reading {namespace}/{API_CONFIGMAP}: "
                             f"{said}") from None  # fmt: skip
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
