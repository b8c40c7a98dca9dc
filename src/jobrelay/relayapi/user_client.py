"""The aggregated API's client: `jobrelay logs` and `describe` through the manager's apiserver.

The user's own kubeconfig reaches the manager's apiserver, as for every other
verb (and as kubectl does): the apiserver authenticates them and forwards the
request to the controller as ``/apis/api.jobrelay.dev/v1alpha1/...``. Nothing is
sent anywhere else. An API that is not registered, or registered but not available,
is said in one line, with what to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from jobrelay.kinds.catalog import DEFAULT_KIND
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, KubeconfigError
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from jobrelay.relayapi.route_rules import API_PATH, MIRROR, RelayError, job_path, plural_of
from jobrelay.vocabulary.resource import Resource

__all__ = ["NOT_REGISTERED", "RelayClient", "RelayError", "connect", "fetch_mirror"]

# What the requests are recorded as (the aggregated group's subresources).
_API = Resource("api.jobrelay.dev", "v1alpha1", "", "APIResourceList", namespaced=True)
_CHECK = f"check `kubectl get apiservice {API_SERVICE_NAME}`"
# What the manager answers for a group nobody registered: a plain-text 404 from its
# mux ("404 page not found"), or a Status naming no object.
_UNSERVED_404 = ("404 page not found", "the server could not find the requested resource")
NOT_REGISTERED = (
    f"the jobrelay API is not registered on this cluster (no APIService {API_SERVICE_NAME}): "
    "run the controller with --api-register (the default, auto, does it when the manager "
    "is on this host, as the local fleet's) or install the chart (charts/jobrelay), which "
    "registers it"
)


def _not_available(detail: str) -> str:
    return (
        f"the jobrelay API is registered but not available ({detail}): the controller "
        f"serving it is not running or not reachable from the manager; {_CHECK} (its "
        "Available condition says why) and the controller's log"
    )


def _relay_error(error: ApiError) -> RelayError:
    """An apiserver's answer as the CLI tells it; the aggregator's own failures (the
    APIService not there or not available) say which, and what to do."""
    if error.code == 0:
        where = error.details.get("server") or "the manager"
        cause = error.details.get("cause") or error.message
        return RelayError(0, "Unreachable", f"cannot connect to {where} ({cause}): check "
                          "--kubeconfig and --context")  # fmt: skip
    # The controller's own 404s carry a reason of their own (NotPlaced, NoPods...) or
    # name the object; the manager's for an unknown group name nothing.
    unserved = any(text in error.message for text in _UNSERVED_404)
    if error.code == 404 and error.reason == "NotFound" and unserved:
        return RelayError(404, "NoAPI", NOT_REGISTERED)
    if error.code == 503 and error.reason in ("ServiceUnavailable", ""):
        return RelayError(503, "APIUnavailable", _not_available(error.message))
    return RelayError(error.code, error.reason, error.message)


class RelayClient:
    """Requests to the aggregated API with the user's own manager client."""

    def __init__(self, manager: ApiClient) -> None:
        self._manager = manager

    async def plural(self, kind: str) -> str:
        """The resource of ``kind`` (Job, JobSet, a configured kind, or its plural) as the
        API's discovery names it."""
        try:
            found = await self._manager.get_subresource(_API, API_PATH, {})
        except ApiError as error:
            raise _relay_error(error) from None
        return plural_of(kind, found.get("resources") or [])

    async def get_json(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        try:
            return await self._manager.get_subresource(_API, path, params)
        except ApiError as error:
            raise _relay_error(error) from None

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """The body of ``path`` as it arrives; RelayError for a refusal."""
        try:
            async with self._manager.stream_subresource(_API, path, params) as chunks:
                yield _relayed(chunks)
        except ApiError as error:
            raise _relay_error(error) from None


async def _relayed(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield chunk
    except ApiError as error:
        raise _relay_error(error) from None


@contextlib.asynccontextmanager
async def connect(
    kubeconfig: str | Path | None = None, context: str | None = None
) -> AsyncIterator[RelayClient]:
    """A client of the API through the manager the kubeconfig's context names."""
    try:
        manager = (
            ApiClient.from_kubeconfig(kubeconfig, context, cluster="manager")
            if kubeconfig
            else ApiClient.from_environment(context, cluster="manager")
        )
    except KubeconfigError as error:
        raise RelayError(0, "Kubeconfig", str(error)) from None
    async with manager:
        yield RelayClient(manager)


async def fetch_mirror(
    namespace: str,
    name: str,
    kind: str = DEFAULT_KIND.ref.kind,
    *,
    kubeconfig: str | Path | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """``{cluster, mirror, pods: [{name, phase, node, restarts, ready, lastState, conditions}]}``
    of a placed workload, as the controller sees it on its worker; RelayError when refused
    (401, 403, 404 with reason NotFound, NotPlaced; 503 WorkerUnavailable or APIUnavailable)."""
    async with connect(kubeconfig, context) as client:
        plural = await client.plural(kind)
        return await client.get_json(job_path(namespace, plural, name, MIRROR), {})
