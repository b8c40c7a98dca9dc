"""The stand-in autoscaler at work on one worker: an informer of its ProvisioningRequests
(every namespace), a queue of requests to look at, the KWOK nodes ``scaleup_rules`` asks
for created (labelled ``type=kwok`` as the fleet's own, so the worker's kwok makes them
Ready), the requests' conditions written through /status with their resourceVersion, and
now and then the nodes of requests that are gone scaled down. Only through
``jobrelay.kube.client.ApiClient``."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS, NODES, PODS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.localfleet.autoscaler.scaleup_rules import (
    REFUSAL_CONFIGMAP,
    REFUSAL_NAMESPACE,
    ScaleUpSettings,
    WorkerNodes,
    merged_conditions,
    new_node_indices,
    next_scaleup_step,
    nodes_to_remove,
    told_to_refuse,
)
from jobrelay.localfleet.nodes import FLEET_LABEL, kwok_node
from jobrelay.localfleet.shape import FLEET_PREFIX
from jobrelay.placement.units import resources_of
from jobrelay.vocabulary import provisioning_api as api

_log = logging.getLogger(__name__)

# On every node the stand-in adds: that it added it, and for which request (its UID).
AUTOSCALED_LABEL = f"{FLEET_PREFIX}autoscaled"
REQUEST_LABEL = f"{FLEET_PREFIX}provisioned-for"
RETRY_SECONDS = 1.0
SCALE_DOWN_EVERY = 5.0

Clock = Callable[[], datetime.datetime]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def scaleup_node_name(cluster: str, index: int) -> str:
    return f"{cluster}-scaleup-{index}"


def scaleup_node(
    cluster: str, index: int, settings: ScaleUpSettings, request_uid: str
) -> dict[str, Any]:
    """A KWOK node of the stand-in's shape, added for the request of ``request_uid``."""
    return kwok_node(
        scaleup_node_name(cluster, index),
        cluster,
        settings.node_capacity(),
        {AUTOSCALED_LABEL: "true", REQUEST_LABEL: request_uid},
    )


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _index_of(name: str, cluster: str) -> int | None:
    prefix = scaleup_node_name(cluster, 0)[:-1]
    suffix = name.removeprefix(prefix)
    return int(suffix) if name.startswith(prefix) and suffix.isdigit() else None


class ScaleUpDriver:
    """Serves the ProvisioningRequests of the worker of ``client`` (named ``cluster`` on its
    nodes) until stopped. ``refused`` lists the status writes the apiserver refused (besides
    conflicts), ``added`` and ``removed`` the nodes it added and scaled down."""

    def __init__(
        self,
        client: ApiClient,
        *,
        cluster: str,
        settings: ScaleUpSettings,
        clock: Clock = _utc_now,
        scale_down_every: float = SCALE_DOWN_EVERY,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.settings = settings
        self.clock = clock
        self.scale_down_every = scale_down_every
        self.refused: list[str] = []
        self.added: list[str] = []
        self.removed: list[str] = []
        self.informer = Informer(client, api.PROVISIONING_REQUESTS)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self.informer.add_handler(self._handle)
        self.informer.start()
        await self.informer.wait_synced()
        self._tasks = [
            asyncio.create_task(self._work(), name=f"autoscaler {self.cluster}"),
            asyncio.create_task(self._scale_down_loop(), name=f"scale-down {self.cluster}"),
        ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.informer.stop()

    async def __aenter__(self) -> ScaleUpDriver:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def wait(self) -> None:
        """Until a work loop ends (only when stopped, or on a bug)."""
        if self._tasks:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)

    def _handle(self, event: InformerEvent) -> None:
        if event.new is not None:
            self._enqueue(event.key)

    def _enqueue(self, key: str) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _later(self, seconds: float, key: str) -> None:
        asyncio.get_running_loop().call_later(max(0.0, seconds), self._enqueue, key)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self._drive(key)
            except Exception:  # one request's bug must not stop the others
                _log.exception("%s: ProvisioningRequest %s", self.cluster, key)
                self._later(RETRY_SECONDS, key)

    async def _templates(self, request: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
        namespace = request["metadata"]["namespace"]
        found: dict[str, dict[str, Any] | None] = {}
        for pod_set in (request.get("spec") or {}).get("podSets") or []:
            name = str((pod_set.get("podTemplateRef") or {}).get("name") or "")
            try:
                found[name] = await self.client.get(api.POD_TEMPLATES, name, namespace=namespace)
            except ApiError as error:
                if not error.is_not_found:
                    raise
                found[name] = None
        return found

    async def _nodes(self) -> list[dict[str, Any]]:
        listed = await self.client.list(NODES, label_selector=f"{FLEET_LABEL}={self.cluster}")
        return list(listed.items)

    async def _consumed(self, request: Mapping[str, Any]) -> bool:
        """Whether a pod consumes ``request`` (asked only when bookings expire)."""
        if self.settings.booking_seconds is None:
            return False
        meta = request["metadata"]
        pods = await self.client.list(PODS, namespace=meta["namespace"])
        return any(
            (pod["metadata"].get("annotations") or {}).get(api.CONSUME_ANNOTATION) == meta["name"]
            for pod in pods.items
        )

    async def _settings_now(self) -> ScaleUpSettings:
        """Its flags, and whether it is told to refuse now (the refusal ConfigMap)."""
        try:
            found = await self.client.get(
                CONFIGMAPS, REFUSAL_CONFIGMAP, namespace=REFUSAL_NAMESPACE
            )
        except ApiError as error:
            if not error.is_not_found:
                raise
            return self.settings
        return told_to_refuse(self.settings, found.get("data"))

    async def _drive(self, key: str) -> None:
        request = self.informer.get(key)
        if request is None:
            return
        uid = str(request["metadata"].get("uid") or "")
        nodes = await self._nodes()
        added = [n for n in nodes if (n["metadata"].get("labels") or {}).get(AUTOSCALED_LABEL)]
        mine = [n for n in added if n["metadata"]["labels"].get(REQUEST_LABEL) == uid]
        view = WorkerNodes(
            added_in_all=len(added),
            added_for_request=len(mine),
            ready_for_request=sum(1 for n in mine if _is_ready(n)),
            allocatable=tuple(
                resources_of((n.get("status") or {}).get("allocatable") or {})
                for n in nodes
                if _is_ready(n) and not (n.get("spec") or {}).get("unschedulable")
            ),
            consumed=await self._consumed(request),
        )
        now = self.clock()
        settings = await self._settings_now()
        step = next_scaleup_step(settings, request, await self._templates(request), view, now)
        if step.add_nodes:
            taken = [_index_of(n["metadata"]["name"], self.cluster) for n in added]
            for index in new_node_indices((i for i in taken if i is not None), step.add_nodes):
                await self._add_node(index, uid)
        if step.recheck_after is not None:
            self._later(step.recheck_after, key)
        if step.conditions is not None:
            await self._write(key, request, step.conditions, now)

    async def _add_node(self, index: int, uid: str) -> None:
        manifest = scaleup_node(self.cluster, index, self.settings, uid)
        try:
            await self.client.create(NODES, manifest)
        except ApiError as error:
            if not error.is_already_exists:
                raise
            return
        self.added.append(manifest["metadata"]["name"])
        _log.info("%s: added node %s", self.cluster, manifest["metadata"]["name"])

    async def _write(
        self,
        key: str,
        request: dict[str, Any],
        wanted: tuple[api.RequestCondition, ...],
        now: datetime.datetime,
    ) -> None:
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = merged_conditions(request, wanted, stamp)
        if conditions == (request.get("status") or {}).get("conditions"):
            return
        meta = request["metadata"]
        body = {
            "apiVersion": api.PROVISIONING_REQUESTS.api_version,
            "kind": api.PROVISIONING_REQUESTS.kind,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": request.get("spec") or {},
            "status": {**(request.get("status") or {}), "conditions": conditions},
        }
        try:
            await self.client.replace(api.PROVISIONING_REQUESTS, body, subresource="status")
        except ApiError as error:
            if error.is_not_found:
                return
            if not error.is_conflict:
                self.refused.append(f"{key}: {error}")
                _log.warning("%s: %s: status refused: %s", self.cluster, key, error)
            self._later(0.1 if error.is_conflict else RETRY_SECONDS, key)
            return
        true = [c.type for c in wanted if c.status == "True"]
        _log.info("%s: ProvisioningRequest %s: conditions True: %s", self.cluster, key, true)

    async def _scale_down_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scale_down_every)
            try:
                await self.scale_down()
            except ApiError as error:
                _log.warning("%s: scale-down: %s", self.cluster, error)

    async def scale_down(self) -> list[str]:
        """Remove the added nodes whose request is gone and that hold no pod; their names."""
        added = {
            n["metadata"]["name"]: str(n["metadata"]["labels"].get(REQUEST_LABEL) or "")
            for n in await self._nodes()
            if (n["metadata"].get("labels") or {}).get(AUTOSCALED_LABEL)
        }
        if not added:
            return []
        live = {str(obj["metadata"].get("uid")) for _key, obj in self.informer.items()}
        pods = await self.client.list(
            PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed"
        )
        busy = {str((pod.get("spec") or {}).get("nodeName") or "") for pod in pods.items}
        gone = nodes_to_remove(added, live, busy)
        for name in gone:
            try:
                await self.client.delete(NODES, name)
            except ApiError as error:
                if not error.is_not_found:
                    raise
            self.removed.append(name)
            _log.info("%s: removed node %s (its request is gone)", self.cluster, name)
        return gone
