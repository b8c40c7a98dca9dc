"""The executor's writes of capacity claims (issue 37, part 1): a workload's PodTemplates
and ProvisioningRequest created on an autoscaled worker, or deleted there; through the
worker's ``kube/`` client only. It decides nothing (steps/claiming_capacity.py does).

A create goes into the workload's namespace there, made or checked open to this manager
first, as a mirror's is. A request or template already there is one of ours (its name
carries the workload's UID). A delete that fails is logged, not fatal: the plan goes on
(the placement or the mirror after it matters more), and the next decision, or the
sweep of leftovers, deletes it again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from jobrelay.controller.relay.plan import CreateProvisioning, DeleteProvisioning, Retry
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.provisioning_api import POD_TEMPLATES, PROVISIONING_REQUESTS
from jobrelay.vocabulary.resource import Resource

__all__ = ["PROVISIONING_ACTIONS", "OpenNamespace", "provisioning_write"]

_log = logging.getLogger(__name__)

PROVISIONING_ACTIONS = (CreateProvisioning, DeleteProvisioning)
# The executor's: make sure a namespace on a worker is there and open to this manager.
OpenNamespace = Callable[[ApiClient, str, str], Awaitable[Retry | None]]


async def provisioning_write(
    action: CreateProvisioning | DeleteProvisioning,
    pool: WorkerPool,
    origin: str,
    open_namespace: OpenNamespace,
) -> Retry | None:
    """Carry out one claim action; a Retry when a create could not be made."""
    worker = pool.get(action.cluster)
    if worker is None:
        if isinstance(action, DeleteProvisioning):
            return None  # its worker went: the sweep deletes it when it is back
        return Retry(f"worker cluster {action.cluster} went away")
    client = worker.client
    if isinstance(action, DeleteProvisioning):
        await _delete(client, action)
        return None
    if not worker.namespace_feed.open_to(origin, action.namespace):
        closed = await open_namespace(client, action.cluster, action.namespace)
        if closed is not None:
            return closed
    try:
        for template in action.templates:
            await _create(client, POD_TEMPLATES, template)
        await _create(client, PROVISIONING_REQUESTS, action.request)
    except ApiError as error:
        message = (
            f"cannot request capacity on worker cluster {action.cluster}: "
            f"{error.code} {error.message}"
        )
        _log.warning("%s", message, extra={"cluster": action.cluster})
        return Retry(message)
    _log.info(
        "requested capacity on %s: ProvisioningRequest %s/%s",
        action.cluster, action.namespace, Meta(action.request).name,
        extra={"cluster": action.cluster},
    )  # fmt: skip
    return None


async def _create(client: ApiClient, resource: Resource, body: JsonObj) -> None:
    try:
        await client.create(resource, body)
    except ApiError as error:
        if not error.is_already_exists:
            raise


async def _delete(client: ApiClient, action: DeleteProvisioning) -> None:
    targets = [(PROVISIONING_REQUESTS, action.name)]
    targets += [(POD_TEMPLATES, name) for name in action.templates]
    for resource, name in targets:
        try:
            await client.delete(resource, name, namespace=action.namespace)
        except ApiError as error:
            if not error.is_not_found:
                _log.warning(
                    "cannot delete %s %s/%s on %s (%s: %s %s); it is tried again",
                    resource.kind, action.namespace, name, action.cluster, action.why,
                    error.code, error.message, extra={"cluster": action.cluster},
                )  # fmt: skip
                return
    _log.info(
        "deleted ProvisioningRequest %s/%s on %s: %s",
        action.namespace, action.name, action.cluster, action.why,
        extra={"cluster": action.cluster},
    )  # fmt: skip
