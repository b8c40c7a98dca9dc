"""What the local fleet's stand-in autoscaler does with one ProvisioningRequest: pure rules,
no I/O (``scaleup_driver`` carries them out through ``jobrelay.kube``).

As cluster-autoscaler does for its two classes:

- ``best-effort-atomic-scale-up``: Accepted at once; after the set delay (counted from the
  request's creation) the nodes its pods need are added, all or none, then Provisioned.
  Refused (Failed=True) when told to refuse, when one of its pods is larger than a node,
  when it would take more nodes than the maximum, or when its ``ValidUntilSeconds`` ran
  out first. With a booking time set, a provisioned request no pod consumes in time
  turns BookingExpired.
- ``check-capacity``: Provisioned=True when its pods fit the worker's nodes as they are
  (each node's allocatable, the pods already there not counted: a stand-in's shortcut),
  Provisioned=False otherwise; nothing is added.

Requests of other classes are left alone, as cluster-autoscaler leaves them. The nodes it
added for a request that is gone, with no pod left on them, are removed (scaled down).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jobrelay.placement.slim_objects import effective_requests
from jobrelay.placement.units import CPU, GPU, MEMORY, PODS, format_units, to_units
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.provisioning_api import RequestCondition

# Why a request failed (condition reasons: CamelCase, as the CRD's pattern wants).
REFUSED = "ScaleUpRefused"
TOO_LARGE = "PodDoesNotFitNodeShape"
MAX_REACHED = "MaxNodesReached"
EXPIRED = "ValidUntilSecondsExpired"
TEMPLATE_MISSING = "PodTemplateNotFound"
EXPIRED_BOOKING = "BookingExpired"
# cluster-autoscaler's own reasons for check-capacity's answer.
CAPACITY_FOUND = "CapacityIsFound"
CAPACITY_NOT_FOUND = "CapacityIsNotFound"
# Looked at again while a template is missing or added nodes are not Ready yet.
RECHECK_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class ScaleUpSettings:
    """The stand-in's flags: how long a scale-up takes, how many nodes it may add in all,
    the shape of each, and whether it refuses every request (with this message)."""

    delay_seconds: float = 20.0
    max_nodes: int = 4
    cpu: str = "16"
    memory: str = "64Gi"
    gpu: int = 0
    pods: int = 110
    refuse: str | None = None
    # Seconds a provisioned request keeps its capacity with no pod consuming it, then
    # BookingExpired (cluster-autoscaler: 10 minutes); None: kept for ever.
    booking_seconds: float | None = None

    def node_capacity(self) -> dict[str, str]:
        """A node's capacity as the Node API writes it."""
        capacity = {CPU: self.cpu, MEMORY: self.memory, PODS: str(self.pods)}
        if self.gpu:
            capacity[GPU] = str(self.gpu)
        return capacity

    def node_resources(self) -> dict[str, int]:
        return {name: to_units(name, quantity) for name, quantity in self.node_capacity().items()}


@dataclass(frozen=True, slots=True)
class ScaleUpStep:
    """What to do now: add ``add_nodes`` nodes for the request, then write ``conditions``
    (None: leave its status alone), and look again after ``recheck_after`` seconds."""

    conditions: tuple[RequestCondition, ...] | None = None
    add_nodes: int = 0
    recheck_after: float | None = None


@dataclass(frozen=True, slots=True)
class WorkerNodes:
    """What the rules read of the worker's nodes: the ones added for this request (and how
    many of those are Ready), how many were added in all, and every Ready node's allocatable."""

    added_in_all: int = 0
    added_for_request: int = 0
    ready_for_request: int = 0
    allocatable: Sequence[Mapping[str, int]] = field(default_factory=tuple)
    # A pod consumes the request (its consume-provisioning-request annotation names it).
    consumed: bool = False


def _condition(kind: str, status: bool, reason: str, message: str) -> RequestCondition:
    return RequestCondition(kind, "True" if status else "False", reason, message)


def _failed(reason: str, message: str) -> ScaleUpStep:
    return ScaleUpStep(
        conditions=(
            _condition(api.ACCEPTED, True, "Accepted", "the stand-in autoscaler took it"),
            _condition(api.PROVISIONED, False, reason, message),
            _condition(api.FAILED, True, reason, message),
        )
    )


def pod_sets_of(
    request: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any] | None]
) -> list[tuple[dict[str, int], int]] | str:
    """Each pod set's requests (placement units, ``pods: 1`` included) and count; or the
    name of a PodTemplate it names that ``templates`` lacks (None or absent)."""
    found = []
    for pod_set in (request.get("spec") or {}).get("podSets") or []:
        name = str((pod_set.get("podTemplateRef") or {}).get("name") or "")
        template = templates.get(name)
        if template is None:
            return name
        pod_spec = (template.get("template") or {}).get("spec") or {}
        found.append((dict(effective_requests(pod_spec)), int(pod_set.get("count") or 1)))
    return found


def nodes_needed(
    pod_sets: Iterable[tuple[Mapping[str, int], int]], node: Mapping[str, int], limit: int
) -> int:
    """How many empty nodes of shape ``node`` the pods take, placed in order, first fit
    (each set fills what the earlier ones left, then new nodes), counted up to ``limit + 1``
    (more is as refused as that). ValueError if a pod is larger than a node."""
    free: list[dict[str, int]] = []
    for requests, count in pod_sets:
        if _per_node(requests, node) == 0:
            raise ValueError(_too_large(requests, node))
        left = count
        for room in free:
            left -= _take(room, requests, left)
            if not left:
                break
        while left:
            if len(free) > limit:
                return limit + 1
            room = dict(node)
            left -= _take(room, requests, left)
            free.append(room)
    return len(free)


def _per_node(requests: Mapping[str, int], room: Mapping[str, int]) -> int:
    """How many pods of ``requests`` fit ``room`` (a pod always asks for one of ``pods``)."""
    return min(
        room.get(resource, 0) // quantity for resource, quantity in requests.items() if quantity
    )


def _take(room: dict[str, int], requests: Mapping[str, int], wanted: int) -> int:
    """Place up to ``wanted`` pods in ``room`` (lowered by what they take); how many."""
    placed = min(wanted, _per_node(requests, room))
    for resource, quantity in requests.items():
        room[resource] = room.get(resource, 0) - quantity * placed
    return placed


def _too_large(requests: Mapping[str, int], node: Mapping[str, int]) -> str:
    for resource, quantity in sorted(requests.items()):
        if node.get(resource, 0) < quantity:
            have = format_units(resource, node.get(resource, 0))
            return (
                f"a pod asks for {format_units(resource, quantity)} {resource}; a node has {have}"
            )
    return "a pod is larger than a node"


def _fits_nodes(
    pod_sets: Sequence[tuple[Mapping[str, int], int]], nodes: Sequence[Mapping[str, int]]
) -> bool:
    free = [dict(node) for node in nodes]
    for requests, count in pod_sets:
        left = count
        for room in free:
            left -= _take(room, requests, left)
        if left:
            return False
    return True


def _age(request: Mapping[str, Any], now: datetime.datetime) -> float:
    since = _timestamp((request.get("metadata") or {}).get("creationTimestamp"))
    return max(0.0, (now - since).total_seconds()) if since else 0.0


def _booking(
    settings: ScaleUpSettings,
    request: Mapping[str, Any],
    nodes: WorkerNodes,
    now: datetime.datetime,
) -> ScaleUpStep:
    """A provisioned request: its booking expires once no pod consumed it in time."""
    if settings.booking_seconds is None or nodes.consumed:
        return ScaleUpStep()
    since = _since(request, api.PROVISIONED)
    left = settings.booking_seconds - (now - since).total_seconds() if since else 0.0
    if left > 0:
        return ScaleUpStep(recheck_after=left)
    message = f"no pod consumed the capacity within {settings.booking_seconds:g}s"
    return ScaleUpStep(
        conditions=(_condition(api.BOOKING_EXPIRED, True, EXPIRED_BOOKING, message),)
    )


def _since(request: Mapping[str, Any], kind: str) -> datetime.datetime | None:
    for entry in (request.get("status") or {}).get("conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return _timestamp(entry.get("lastTransitionTime"))
    return None


def _timestamp(value: object) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(str(value or "").replace("Z", "+00:00"))
    except ValueError:
        return None


def _valid_for(request: Mapping[str, Any]) -> float | None:
    value = ((request.get("spec") or {}).get("parameters") or {}).get(api.VALID_UNTIL_SECONDS)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# Told to refuse while it runs: this ConfigMap on its worker, its key ``refuse`` the
# message (one line, at most REFUSAL_MAX characters); deleting it ends the refusals.
REFUSAL_NAMESPACE = "kube-system"
REFUSAL_CONFIGMAP = "jobrelay-standin-autoscaler"
REFUSAL_KEY = "refuse"
REFUSAL_MAX = 300


def told_to_refuse(settings: ScaleUpSettings, data: Mapping[str, Any] | None) -> ScaleUpSettings:
    """``settings`` as the refusal ConfigMap's ``data`` (None: no ConfigMap) leaves them:
    its message, bounded to one line, refuses every request not provisioned yet."""
    message = (data or {}).get(REFUSAL_KEY)
    if not isinstance(message, str):
        return settings
    line = " ".join(message.split())[:REFUSAL_MAX]
    return replace(settings, refuse=line)


def next_scaleup_step(
    settings: ScaleUpSettings,
    request: Mapping[str, Any],
    templates: Mapping[str, Mapping[str, Any] | None],
    nodes: WorkerNodes,
    now: datetime.datetime,
) -> ScaleUpStep:
    """What the stand-in does next with ``request`` (see the module's docstring)."""
    conditions = api.conditions_of(request)
    class_name = str((request.get("spec") or {}).get("provisioningClassName") or "")
    if class_name not in api.CLASSES:
        return ScaleUpStep()
    if any(
        kind in conditions and conditions[kind].status == "True"
        for kind in (api.FAILED, api.BOOKING_EXPIRED, api.CAPACITY_REVOKED)
    ):
        return ScaleUpStep()
    if class_name == api.CHECK_CAPACITY and api.PROVISIONED in conditions:
        return ScaleUpStep()  # answered once, as cluster-autoscaler does
    if conditions.get(api.PROVISIONED, RequestCondition("", "")).status == "True":
        return _booking(settings, request, nodes, now)
    if settings.refuse is not None:
        return _failed(REFUSED, settings.refuse or "the stand-in autoscaler was told to refuse")
    pod_sets = pod_sets_of(request, templates)
    if isinstance(pod_sets, str):
        return ScaleUpStep(
            conditions=(
                _condition(api.ACCEPTED, False, TEMPLATE_MISSING, f"no PodTemplate {pod_sets!r}"),
            ),
            recheck_after=RECHECK_SECONDS,
        )
    if class_name == api.CHECK_CAPACITY:
        fits = _fits_nodes(pod_sets, nodes.allocatable)
        reason = CAPACITY_FOUND if fits else CAPACITY_NOT_FOUND
        message = "the pods fit the nodes there" if fits else "the pods do not fit the nodes there"
        return ScaleUpStep(
            conditions=(
                _condition(api.ACCEPTED, True, "Accepted", "the stand-in autoscaler took it"),
                _condition(api.PROVISIONED, fits, reason, message),
            )
        )
    return _scale_up(settings, request, pod_sets, nodes, now)


def _scale_up(
    settings: ScaleUpSettings,
    request: Mapping[str, Any],
    pod_sets: Sequence[tuple[Mapping[str, int], int]],
    nodes: WorkerNodes,
    now: datetime.datetime,
) -> ScaleUpStep:
    try:
        needed = nodes_needed(pod_sets, settings.node_resources(), settings.max_nodes)
    except ValueError as error:
        return _failed(TOO_LARGE, str(error))
    accepted = _condition(api.ACCEPTED, True, "Accepted", "the stand-in autoscaler took it")
    age, valid_for = _age(request, now), _valid_for(request)
    if age < settings.delay_seconds:
        if valid_for is not None and valid_for < settings.delay_seconds:
            expires_in = valid_for - age
            if expires_in <= 0:
                return _failed(EXPIRED, f"not provisioned within {valid_for:g}s")
            return ScaleUpStep(conditions=(accepted,), recheck_after=expires_in)
        waiting = _condition(api.PROVISIONED, False, "ScaleUpInProgress",
                             f"{needed} nodes come {settings.delay_seconds:g}s after creation")  # fmt: skip
        return ScaleUpStep(
            conditions=(accepted, waiting), recheck_after=settings.delay_seconds - age
        )
    others = nodes.added_in_all - nodes.added_for_request
    if others + needed > settings.max_nodes:
        return _failed(
            MAX_REACHED,
            f"needs {needed} more nodes; {others} of at most {settings.max_nodes} are added already",
        )
    add = max(0, needed - nodes.added_for_request)
    if add or nodes.ready_for_request < needed:
        waiting = _condition(api.PROVISIONED, False, "ScaleUpInProgress",
                             f"{nodes.ready_for_request} of {needed} nodes Ready")  # fmt: skip
        return ScaleUpStep(
            conditions=(accepted, waiting), add_nodes=add, recheck_after=RECHECK_SECONDS
        )
    return ScaleUpStep(
        conditions=(
            accepted,
            _condition(api.PROVISIONED, True, "Provisioned", f"{needed} nodes added"),
        )
    )


def merged_conditions(
    stored: Mapping[str, Any] | None, wanted: Iterable[RequestCondition], now: str
) -> list[dict[str, Any]]:
    """``status.conditions`` with ``wanted`` set: the others kept, a condition's
    lastTransitionTime kept while its status stays the same."""
    status = (stored or {}).get("status") or {}
    kept: dict[str, dict[str, Any]] = {
        str(entry.get("type")): dict(entry) for entry in status.get("conditions") or []
    }
    for condition in wanted:
        before = kept.get(condition.type) or {}
        since = (
            before.get("lastTransitionTime") if before.get("status") == condition.status else None
        )
        kept[condition.type] = {
            "type": condition.type,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": since or now,
        }
    return list(kept.values())


def new_node_indices(taken: Iterable[int], count: int) -> list[int]:
    """The ``count`` lowest node indices (from 1) not in ``taken``."""
    used, found, index = set(taken), list[int](), 1
    while len(found) < count:
        if index not in used:
            found.append(index)
        index += 1
    return found


def nodes_to_remove(
    added: Mapping[str, str], live_requests: Iterable[str], busy: Iterable[str]
) -> list[str]:
    """The added nodes (name: the UID of the request they were added for) whose request is
    gone and that hold no pod: scaled down."""
    live, occupied = set(live_requests), set(busy)
    return sorted(name for name, uid in added.items() if uid not in live and name not in occupied)
