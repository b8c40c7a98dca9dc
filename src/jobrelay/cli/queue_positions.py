"""What `jobrelay get` reads to show each workload's RelayQueue and, while it waits, its
place there: the RelayQueues, the Namespaces' labels and the PriorityClasses (one list
each), and, when the listing was narrower than the queues (one namespace, a selector,
names), the queued kinds across namespaces once, to count what waits ahead. The rules
are :mod:`jobrelay.admission.queue_places`' (the controller's); whatever the user may not read
is left out.

When the controller's aggregated API answers (``.../namespaces/NS/pendingworkloads``), a
waiting workload's queue and position are the controller's, counted over every workload
whatever the user may read (a tenant with a namespace RoleBinding alone sees its true
place); else they are counted here, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from jobrelay.admission.queue_model import QueueSpec
from jobrelay.admission.queue_places import QueueKnowledge, QueuePlace, is_pending, places, queue_of
from jobrelay.admission.queue_specs import read_queue
from jobrelay.admission.start_estimate import StartEstimate
from jobrelay.admission.workload_reads import Priorities
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.readmodel.estimate_reads import EstimatedWorkers, estimated_starts, worker_figures

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

__all__ = [
    "POSITION_ANNOTATION",
    "QUEUE_ANNOTATION",
    "QueueView",
    "read_counted",
    "read_estimates",
    "read_known",
    "read_places",
    "read_workers",
    "with_place",
]  # fmt: skip

# Set by `jobrelay get -o json|yaml|jsonpath|custom-columns` on the objects it prints
# (never stored): the queue a workload is in and, while it waits, its place there.
QUEUE_ANNOTATION = "jobrelay.dev/queue-name"
POSITION_ANNOTATION = "jobrelay.dev/queue-position"


# The kinds `jobrelay get all` lists: counted whichever ones were asked for.
_BUILT_IN = ("Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io")


class PositionQuery(Protocol):
    """What `jobrelay get` asked for (``get.Query``)."""

    @property
    def kinds(self) -> tuple[WorkloadKind, ...]: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def selector(self) -> str | None: ...
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def controller_name(self) -> str: ...
    @property
    def claims(self) -> Mapping[str, str]: ...


async def read_known(client: ApiClient) -> QueueKnowledge:
    """The RelayQueues, the Namespaces' labels and the PriorityClasses, as far as the user
    may list them (no RelayQueue: nothing more is read)."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import NAMESPACES, PRIORITY_CLASSES, RELAY_QUEUES

    try:
        queue_objects = (await client.list(RELAY_QUEUES)).items
    except ApiError as error:
        if not error.is_not_found:
            return QueueKnowledge()  # not readable: the label alone names a queue
        queue_objects = []  # no RelayQueue CRD: no queue
    queues: dict[str, QueueSpec] = {}
    for obj in queue_objects:
        spec = read_queue(obj)
        if isinstance(spec, QueueSpec):
            queues[spec.name] = spec
    if not queues:
        return QueueKnowledge(queues={}, namespace_labels={})
    labels: dict[str, Mapping[str, str]] | None
    try:
        labels = {
            str((ns.get("metadata") or {}).get("name")): _labels(ns)
            for ns in (await client.list(NAMESPACES)).items
        }
    except ApiError:
        labels = None
    try:
        priorities = Priorities.of((await client.list(PRIORITY_CLASSES)).items)
    except ApiError:
        priorities = Priorities()  # not readable: every priority 0 (said in docs/queues.md)
    return QueueKnowledge(queues, labels, priorities)


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    found = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the count needs of a workload listed only to count it: not its status history."""
    metadata = obj.get("metadata") or {}
    kept = ("name", "namespace", "labels", "annotations", "creationTimestamp", "deletionTimestamp")
    return {**obj, "metadata": {k: metadata[k] for k in kept if k in metadata}}


def _key(kind: WorkloadKind, obj: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = obj.get("metadata") or {}
    return (kind.name, str(metadata.get("namespace")), str(metadata.get("name")))


@dataclass
class QueueView:
    """The workloads counted and what was read to place them; a watch updates it."""

    known: QueueKnowledge
    managed: Callable[[WorkloadKind, Mapping[str, Any]], bool]
    counted: dict[tuple[str, str, str], tuple[WorkloadKind, Mapping[str, Any]]]
    # Some workload listed is in a queue: the default table shows QUEUE and POSITION.
    shown: bool = False
    _places: dict[str, QueuePlace] | None = None
    # The controller's places of the waiting workloads (by entry key), in the namespaces
    # it answered for (pendingworkloads): its word over the count here.
    served: dict[str, QueuePlace] = field(default_factory=dict)
    served_namespaces: frozenset[str] = frozenset()
    # `-o wide`: the workers' room, read for the ESTIMATED START column (None: not
    # readable, only the queues' quotas count).
    estimating: bool = False
    workers: EstimatedWorkers | None = None
    _estimates: dict[str, StartEstimate] | None = None

    def estimate(
        self, kind: WorkloadKind, obj: Mapping[str, Any], now: datetime
    ) -> StartEstimate | None:
        """A waiting workload's estimated start (None: not waiting, or not estimated)."""
        if not self.estimating:
            return None
        if self._estimates is None:
            self._estimates = estimated_starts(list(self.counted.values()), self.known,
                                               self.workers, now)  # fmt: skip
        metadata = obj.get("metadata") or {}
        return self._estimates.get(
            f"{kind.ref.kind} {metadata.get('namespace')}/{metadata.get('name')}"
        )

    def place(self, kind: WorkloadKind, obj: Mapping[str, Any]) -> QueuePlace | None:
        if not self.shown:
            return None
        metadata = obj.get("metadata") or {}
        key = f"{kind.ref.kind} {metadata.get('namespace')}/{metadata.get('name')}"
        if key in self.served:
            return self.served[key]
        if self._places is None:
            self._places = places(self.counted.values(), self.known)
        found = self._places.get(key)
        if found is not None and metadata.get("namespace") in self.served_namespaces:
            return QueuePlace(found.queue)  # the controller holds it in no queue's order now
        return found

    def seen(self, kind: WorkloadKind, obj: Mapping[str, Any]) -> None:
        """A watch's new version of a workload: every position is counted again."""
        if (self.shown or self.estimating) and self.managed(kind, obj):
            self.counted[_key(kind, obj)] = (kind, obj)
            self._places = None
            self._estimates = None
            if not is_pending(kind, obj):
                _, namespace, name = _key(kind, obj)
                self.served.pop(f"{kind.ref.kind} {namespace}/{name}", None)


async def read_workers(client: ApiClient) -> EstimatedWorkers | None:
    """The WorkerClusters' capacity figures (None: the user may not list them)."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import WORKER_CLUSTERS

    try:
        return worker_figures((await client.list(WORKER_CLUSTERS)).items)
    except ApiError:
        return None


# Namespaces asked of the controller at most (more: counted here, as before).
_MAX_SERVED_NAMESPACES = 20


async def read_served(
    client: ApiClient, namespaces: Sequence[str]
) -> tuple[dict[str, QueuePlace], frozenset[str]] | None:
    """The controller's places of the waiting workloads of ``namespaces`` (its
    pendingworkloads), None when it cannot tell them all: the API not registered or not
    available, not allowed, no plan yet, or a list cut short."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.relayapi.pending_rules import PENDING_KIND, PENDING_WORKLOADS, pending_path
    from jobrelay.relayapi.route_rules import API_GROUP, API_VERSION
    from jobrelay.vocabulary.resource import Resource

    if not namespaces or len(namespaces) > _MAX_SERVED_NAMESPACES:
        return None
    resource = Resource(API_GROUP, API_VERSION, PENDING_WORKLOADS, PENDING_KIND)
    served: dict[str, QueuePlace] = {}
    for namespace in namespaces:
        try:
            body = await client.get_subresource(resource, pending_path(namespace), {})
        except ApiError:
            return None
        if not body.get("planned") or body.get("truncated"):
            return None
        for item in body.get("items") or []:
            if isinstance(item, Mapping) and item.get("queue"):
                position = item.get("position")
                served[f"{item.get('kind')} {namespace}/{item.get('name')}"] = QueuePlace(
                    str(item["queue"]), position if isinstance(position, int) else None
                )
    return served, frozenset(namespaces)


async def read_places(
    client: ApiClient,
    queries: Sequence[PositionQuery],
    found: Sequence[tuple[WorkloadKind, Mapping[str, Any]]],
    *,
    estimating: bool = False,
) -> QueueView:
    """What places each workload in ``found`` in its queue; nothing more is read when
    none of them is in one, and no workload across namespaces when none waits.
    ``estimating`` (`-o wide`): the workers' room too, when some workload waits."""
    from jobrelay.kube.errors import ApiError

    query = queries[0]

    def managed(kind: WorkloadKind, obj: Mapping[str, Any]) -> bool:
        """The controller's (a workload named on the command line may be anyone's)."""
        claimed = query.claims.get(kind.name) or query.controller_name
        return kind.managed_by(dict(obj)) == claimed

    counted = {_key(kind, obj): (kind, obj) for kind, obj in found if managed(kind, obj)}
    known = await read_known(client)
    view = QueueView(known, managed, counted)
    # The controller is asked when queues may hold them: some queue, or none readable.
    waiting = sorted({key[1] for key, (kind, obj) in counted.items() if is_pending(kind, obj)})
    served = await read_served(client, waiting) if known.queues != {} else None
    if served is not None:
        view.served, view.served_namespaces = served
    view.shown = bool(view.served) or any(queue_of(obj, known) for _, obj in counted.values())
    if estimating and any(is_pending(kind, obj) for kind, obj in counted.values()):
        view.estimating = True
        view.workers = await read_workers(client)
    if (served is not None and not view.estimating) or not any(
        is_pending(kind, obj) and queue_of(obj, known) for kind, obj in counted.values()
    ):
        return view  # the controller's positions (no estimate to make), or none to count
    complete = {
        kind.name for asked in queries if asked.namespace is None and not asked.selector
        and not asked.names for kind in asked.kinds
    }  # fmt: skip
    kinds = {kind.name: kind for asked in queries for kind in asked.kinds}
    kinds.update({name: DEDICATED[name] for name in _BUILT_IN})
    for kind in kinds.values():
        if kind.name in complete:
            continue
        try:
            page = await client.list(kind.ref, transform=_slim)
        except ApiError:
            continue  # not served, or not listable across namespaces: count what was listed
        for obj in page.items:
            if managed(kind, obj):
                counted.setdefault(_key(kind, obj), (kind, obj))
    return view


def with_place(obj: Mapping[str, Any], place: QueuePlace | None) -> dict[str, Any]:
    """The object as printed: its queue and place as annotations (never stored)."""
    if place is None:
        return dict(obj)
    metadata = dict(obj.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[QUEUE_ANNOTATION] = place.queue
    if place.position is not None:
        annotations[POSITION_ANNOTATION] = str(place.position)
    return {**obj, "metadata": {**metadata, "annotations": annotations}}


async def read_counted(
    client: ApiClient,
    kinds: Sequence[WorkloadKind],
    namespaces: Sequence[str],
    *,
    controller_name: str,
) -> list[tuple[WorkloadKind, Mapping[str, Any]]]:
    """The workloads of ``kinds`` the controller runs, across namespaces when the user may
    list them, else in ``namespaces``."""
    from jobrelay.kube.errors import ApiError

    counted: dict[tuple[str, str, str], tuple[WorkloadKind, Mapping[str, Any]]] = {}
    for kind in {kind.name: kind for kind in kinds}.values():
        try:
            pages = [(await client.list(kind.ref, transform=_slim)).items]
        except ApiError:
            pages = []
            for namespace in sorted(set(namespaces)):
                try:
                    pages.append((await client.list(kind.ref, namespace=namespace)).items)
                except ApiError:
                    continue  # not readable there: counted without it
        for items in pages:
            for obj in items:
                if kind.managed_by(dict(obj)) == controller_name:
                    counted[_key(kind, obj)] = (kind, obj)
    return list(counted.values())


async def read_estimates(
    client: ApiClient,
    found: Sequence[tuple[WorkloadKind, Mapping[str, Any]]],
    now: datetime,
    *,
    controller_name: str,
) -> dict[str, StartEstimate]:
    """The estimated start of each waiting workload of ``found``, by entry key: the
    queues, the workers' room and the workloads of the same kinds (:func:`read_counted`)."""
    known = await read_known(client)
    workers = await read_workers(client)
    namespaces = [str((obj.get("metadata") or {}).get("namespace")) for _, obj in found]
    listed = await read_counted(client, [kind for kind, _ in found], namespaces,
                                controller_name=controller_name)  # fmt: skip
    counted = {_key(kind, obj): (kind, obj) for kind, obj in listed}
    for kind, named in found:
        counted.setdefault(_key(kind, named), (kind, named))
    return estimated_starts(list(counted.values()), known, workers, now)
