"""Cordon, drain and remove a worker: the requests behind `jobrelay clusters`.

The decisions and messages are in :mod:`jobrelay.fleet.maintenance_rules`; this module
only reads and writes the ``WorkerCluster`` on the manager, waits for the
controller's answer, and deletes the mirrors left on the worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobrelay.fleet import refusals, workerclusters
from jobrelay.fleet.maintenance_rules import (
    CleanupResult,
    DrainMode,
    DrainProgress,
    WorkerClusterView,
    drain_patch,
    drain_progress,
)
from jobrelay.kinds.catalog import parse_kind_name
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import WORKER_CLUSTERS
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import mirror_selector
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "CLI_FIELD_MANAGER",
    "connect_worker",
    "delete_mirrors",
    "get_worker",
    "patch_spec",
    "start_drain",
    "wait_until_drained",
]

# The spec fields the CLI sets (cordoned, drain) are owned by this manager, apart
# from those `clusters add` applies, so re-registering a worker keeps them.
CLI_FIELD_MANAGER = "jobrelay-cli"
# Each watch of the one WorkerCluster lasts this long before it is re-armed.
_WATCH_SECONDS = 60
_RETRY_INITIAL, _RETRY_MAX = 1.0, 30.0
# A worker being removed may be slow or gone: fail fast rather than hang the CLI.
_WORKER_OPTIONS = ApiOptions(connect_timeout=5.0, request_timeout=15.0)
# Answers that may well be different on the next try.
_TRANSIENT_CODES = frozenset({429, 500, 502, 503, 504})


async def get_worker(client: ApiClient, name: str) -> dict[str, Any]:
    try:
        return await client.get(WORKER_CLUSTERS, name)
    except ApiError as error:
        if error.is_not_found:
            raise workerclusters.RegistryError(_not_found(error, name)) from error
        raise


def _not_found(error: ApiError, name: str) -> str:
    # A 404 without details names no object: the CRD itself is missing.
    if (error.details or {}).get("name") == name or f'"{name}"' in error.message:
        return f"no worker cluster named {name} (`jobrelay clusters list` shows those registered)"
    return workerclusters.missing_crd(WORKER_CLUSTERS)


async def patch_spec(client: ApiClient, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """Merge-patch the WorkerCluster's spec; the object as stored afterwards."""
    try:
        return await client.patch(WORKER_CLUSTERS, name, patch, field_manager=CLI_FIELD_MANAGER)
    except ApiError as error:
        if error.is_not_found:
            raise workerclusters.RegistryError(_not_found(error, name)) from error
        raise


async def start_drain(client: ApiClient, name: str, mode: DrainMode) -> dict[str, Any]:
    """Cordon the worker and set ``spec.drain``; the object as stored afterwards.

    An older CRD without ``spec.drain`` would prune the field silently and the
    drain would never start: that is an error, with the fix.
    """
    stored = await patch_spec(client, name, drain_patch(mode))
    if (stored.get("spec") or {}).get("drain") != mode.value:
        raise workerclusters.RegistryError(
            "the WorkerCluster CRD on the management cluster predates spec.drain, so the "
            "drain was dropped: upgrade jobrelay's CRDs (`helm upgrade` of the chart, or "
            f"`kubectl apply --server-side -f {workerclusters.CRD_FILES}`), then drain again"
        )
    return stored


async def wait_until_drained(
    client: ApiClient,
    stored: Mapping[str, Any],
    *,
    timeout: float | None,
    on_progress: Callable[[DrainProgress], None],
    on_retry: Callable[[str], None],
) -> tuple[WorkerClusterView, bool]:
    """Watch the WorkerCluster (``stored``: as the drain request left it) until the
    controller reports it drained, or ``timeout`` seconds pass: its last state and
    whether it was drained.

    Like ``kubectl wait``: one watch on the one object, resumed from the last
    version seen and restarted from a GET when that version expired; a broken
    connection or an unavailable apiserver is retried with backoff (each retry
    reported through ``on_retry``); any other refusal is raised. A deleted
    WorkerCluster is a RegistryError.
    """
    last = WorkerClusterView.of(stored)
    since_generation = last.generation

    def seen(obj: Mapping[str, Any]) -> bool:
        nonlocal last
        last = WorkerClusterView.of(obj)
        progress = drain_progress(last, since_generation=since_generation)
        on_progress(progress)
        return progress.done

    try:
        async with asyncio.timeout(timeout):
            await _watch_until(client, last.name, seen, on_retry)
    except TimeoutError:
        return last, False
    return last, True


async def _watch_until(
    client: ApiClient,
    name: str,
    done: Callable[[Mapping[str, Any]], bool],
    on_retry: Callable[[str], None],
) -> None:
    delay = _RETRY_INITIAL
    version = ""  # empty: start over from a GET
    while True:
        try:
            if not version:
                obj = await get_worker(client, name)
                if done(obj):
                    return
                version = str(obj["metadata"]["resourceVersion"])
            async with client.watch(
                WORKER_CLUSTERS,
                field_selector=f"metadata.name={name}",
                resource_version=version,
                timeout_seconds=_WATCH_SECONDS,
            ) as events:
                async for event in events:
                    if event.type == "ERROR":
                        raise ApiError.from_status(event.object)
                    version = Meta(event.object).resource_version or version
                    if event.type == "DELETED":
                        raise workerclusters.RegistryError(
                            f"worker cluster {name} was deleted while draining"
                        )
                    if event.type in ("ADDED", "MODIFIED") and done(event.object):
                        return
                    delay = _RETRY_INITIAL  # the watch works: a later failure starts afresh
        except ApiError as error:
            if error.is_gone:
                version = ""
                continue
            if not (error.code == 0 or error.code in _TRANSIENT_CODES):
                raise
            on_retry(f"cannot watch worker cluster {name} ({error}); retrying in {delay:g}s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)
            version = ""


# -- leaving no mirror behind -------------------------------------------------------------


def connect_worker(kubeconfig: Mapping[str, Any], context: str | None, name: str) -> ApiClient:
    """A client for the worker from its Secret's kubeconfig (replaced in unit tests)."""
    return ApiClient.from_kubeconfig_dict(
        kubeconfig, context, cluster=name, options=_WORKER_OPTIONS
    )


async def delete_mirrors(
    manager: ApiClient,
    worker: Mapping[str, Any],
    *,
    namespace: str,
    kind_names: Sequence[str],
    controller_name: str,
    origin: str,
    connect: Callable[[Mapping[str, Any], str | None, str], ApiClient] = connect_worker,
    allow_exec: bool = False,
) -> CleanupResult:
    """Delete every mirror this controller (of this origin) created on the worker, of each
    kind, in every namespace, with the worker's credentials from its Secret.

    Never raises for the worker's sake: when it cannot be reached (or its Secret
    is unusable) the result says why, with what was deleted until then.
    """
    name = str(worker["metadata"]["name"])
    deleted: dict[str, int] = {}
    not_served: list[str] = []
    selector = mirror_selector(controller_name, origin)
    try:
        kubeconfig = await workerclusters.read_kubeconfig(
            manager, worker, namespace, allow_exec=allow_exec
        )
        client = connect(kubeconfig, (worker.get("spec") or {}).get("context"), name)
    except (workerclusters.RegistryError, ValueError) as error:  # KubeconfigError is a ValueError
        return CleanupResult(deleted, (), _why(error))
    async with client:
        for kind_name in kind_names:
            try:
                resource = await _served(client, kind_name)
                if resource is None:
                    not_served.append(kind_name)
                    continue
                deleted[kind_name] = 0
                for mirror in (await client.list(resource, label_selector=selector)).items:
                    if await _delete(client, resource, mirror):
                        deleted[kind_name] += 1
            except ApiError as error:
                return CleanupResult(deleted, tuple(not_served), _why(error))
    return CleanupResult(deleted, tuple(not_served))


def _why(error: BaseException) -> str:
    reason, message = refusals.classify(error)
    return f"{reason}: {message}"


async def _served(client: ApiClient, kind_name: str) -> Resource | None:
    """The resource the worker serves ``Kind.version.group`` as; None if it does not."""
    kind, version, group = parse_kind_name(kind_name)
    try:
        resources = await client.discover(group, version)
    except ApiError as error:
        if error.is_not_found:
            return None
        raise
    match = next((r for r in resources if r.get("kind") == kind and "/" not in r["name"]), None)
    if match is None:
        return None
    return Resource(group, version, str(match["name"]), kind, bool(match.get("namespaced", True)))


async def _delete(client: ApiClient, resource: Resource, mirror: Mapping[str, Any]) -> bool:
    """Delete this incarnation (UID precondition); False when someone else got there first."""
    metadata = mirror["metadata"]
    try:
        await client.delete(
            resource, metadata["name"], namespace=metadata.get("namespace"), uid=metadata["uid"]
        )
    except ApiError as error:
        if error.is_not_found or error.is_conflict:
            return False
        raise
    return True
