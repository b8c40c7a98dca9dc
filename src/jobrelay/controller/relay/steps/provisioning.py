"""Claiming capacity that autoscaled workers can add (issue 37, part 1): pure rules, no
I/O; used by a decision through claiming_capacity.py.

A workload that fits no worker now, but fits the nodes an autoscaled worker can add
(``spec.autoscaling.nodeShapes`` of its WorkerCluster), is not NeverFits: jobrelay asks
up to N such workers at once for the capacity, each with a ProvisioningRequest (and a
PodTemplate per pod group) in the workload's namespace there. The first worker to answer
``Provisioned=True`` wins: the workload is placed there, its mirror's pods consuming the
request (:func:`jobrelay.vocabulary.provisioning_api.consuming_annotations`), and the
other requests are deleted at once. A request refused (``Failed``) or whose booking or
capacity went (``BookingExpired``, ``CapacityRevoked``) is kept, so that its worker is not
asked again, and once no request is left pending their reasons are the workload's held
reason. Requests never outlive their workload: every object made carries the workload's
UID (:data:`PROVISIONING_FOR_LABEL`); which go when is claiming_capacity.py's.

The fit to added nodes counts resources only (the shapes carry no labels or taints):
each pod group's pods are packed, first fit, onto at most ``count`` empty nodes of each
shape, the shapes in their order.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.placement.units import CPU, GPU, MEMORY, PODS, to_units
from jobrelay.placement.workload import PodGroup
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.autoscaling_spec import AddableNodeShape, WorkerAutoscaling

# On every ProvisioningRequest and PodTemplate jobrelay makes: the workload's UID.
PROVISIONING_FOR_LABEL = api.PROVISIONING_FOR_LABEL
# The held reason of a workload whose every request was refused or went.
PROVISIONING_FAILED = "ProvisioningFailed"
DEFAULT_CANDIDATES = 2
# The pods a node takes when its shape does not say (the kubelet's default).
_PODS_PER_NODE = 110
# A request's conditions are written by the worker's autoscaler, not jobrelay: what they
# say is one line of at most this many characters before an Event or a log repeats it.
_SAID_LIMIT = 300


@dataclass(frozen=True, slots=True)
class AutoscaledCandidate:
    """A worker that may be asked: its autoscaling block, and how many of jobrelay's
    requests are open there now (``maxRequests`` bounds them)."""

    name: str
    autoscaling: WorkerAutoscaling
    open_requests: int = 0


def _node_room(shape: AddableNodeShape) -> dict[str, int]:
    room = {CPU: to_units(CPU, shape.cpu), MEMORY: to_units(MEMORY, shape.memory),
            PODS: _PODS_PER_NODE}  # fmt: skip
    if shape.gpu:
        room[GPU] = shape.gpu
    return room


def _take(room: dict[str, int], requests: Mapping[str, int], wanted: int) -> int:
    """Place up to ``wanted`` pods in ``room`` (lowered by what they take); how many."""
    placed = min([wanted, *(room.get(r, 0) // q for r, q in requests.items() if q > 0)])
    for resource, quantity in requests.items():
        room[resource] = room.get(resource, 0) - quantity * placed
    return placed


def fits_added_nodes(groups: Sequence[PodGroup], autoscaling: WorkerAutoscaling) -> bool:
    """Whether every pod of ``groups`` fits the nodes the worker can add, all at once."""
    rooms = [
        _node_room(shape)
        for shape in autoscaling.node_shapes
        for _ in range(min(shape.count, sum(g.count for g in groups)))
    ]
    for group in groups:
        requests = {PODS: 1, **group.requests}
        left = group.count
        for room in rooms:
            left -= _take(room, requests, left)
            if not left:
                break
        if left:
            return False
    return True


def candidate_workers(
    groups: Sequence[PodGroup],
    workers: Sequence[AutoscaledCandidate],
    limit: int = DEFAULT_CANDIDATES,
) -> tuple[str, ...]:
    """The workers to ask, at most ``limit``, in name order: those whose added nodes
    would fit the workload and that have room for one more request. The caller passes
    only workers the workload may go to (connected, not cordoned, allowed by its
    selectors and its namespace's policy, not avoided)."""
    fitting = sorted(
        worker.name
        for worker in workers
        if worker.open_requests < worker.autoscaling.max_requests
        and fits_added_nodes(groups, worker.autoscaling)
    )
    return tuple(fitting[: max(0, limit)])


def workload_tag(kind: str, key: str) -> str:
    """A workload's work queue key (its kind's name, ``namespace/name``) as the annotation
    of its requests says it (:data:`api.PROVISIONING_WORKLOAD_ANNOTATION`)."""
    return f"{kind}:{key}"


def request_name(workload_uid: str) -> str:
    """The name of the workload's ProvisioningRequest on every worker asked (one per
    worker, in the workload's namespace), and the prefix of its PodTemplates."""
    return f"jobrelay-{workload_uid}"


def provisioning_objects(
    workload_uid: str,
    namespace: str,
    pod_sets: Sequence[tuple[Mapping[str, Any], int]],
    class_name: str,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The PodTemplates (one per pod set: its pod template spec, as the mirror's pods
    will be, and how many) and the ProvisioningRequest that names them."""
    name = request_name(workload_uid)
    labels = {PROVISIONING_FOR_LABEL: workload_uid}
    names = [f"{name}-{index}" for index in range(len(pod_sets))]
    templates: list[dict[str, Any]] = [
        {
            "apiVersion": api.POD_TEMPLATES.api_version,
            "kind": api.POD_TEMPLATES.kind,
            "metadata": {"name": template_name, "namespace": namespace, "labels": labels},
            "template": dict(template),
        }
        for template_name, (template, _count) in zip(names, pod_sets, strict=True)
    ]
    request = {
        "apiVersion": api.PROVISIONING_REQUESTS.api_version,
        "kind": api.PROVISIONING_REQUESTS.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "provisioningClassName": class_name,
            "podSets": [
                {"podTemplateRef": {"name": template_name}, "count": count}
                for template_name, (_spec, count) in zip(names, pod_sets, strict=True)
            ],
        },
    }
    return templates, request


class ProvisioningState(enum.Enum):
    PENDING = "Pending"
    PROVISIONED = "Provisioned"
    GONE = "Gone"  # refused, or its booking or capacity went


@dataclass(frozen=True, slots=True)
class ProvisioningAnswer:
    """One worker's request as last seen: its state, and for GONE why (reason: message);
    for PROVISIONED, when it turned so (an RFC 3339 text: the earliest wins)."""

    state: ProvisioningState
    why: str = ""
    since: str = ""


def answer_of(request: Mapping[str, Any]) -> ProvisioningAnswer:
    """What a stored request says, by its conditions (a refusal's words bounded)."""
    conditions = api.conditions_of(request)
    for kind in (api.FAILED, api.BOOKING_EXPIRED, api.CAPACITY_REVOKED):
        found = conditions.get(kind)
        if found is not None and found.status == "True":
            why = ": ".join(part for part in (found.reason or kind, found.message) if part)
            return ProvisioningAnswer(
                ProvisioningState.GONE, why=" ".join(why.split())[:_SAID_LIMIT]
            )
    provisioned = conditions.get(api.PROVISIONED)
    if provisioned is not None and provisioned.status == "True":
        since = ""
        for entry in (request.get("status") or {}).get("conditions") or []:
            if isinstance(entry, Mapping) and entry.get("type") == api.PROVISIONED:
                since = str(entry.get("lastTransitionTime") or "")
        return ProvisioningAnswer(ProvisioningState.PROVISIONED, since=since)
    return ProvisioningAnswer(ProvisioningState.PENDING)


@dataclass(frozen=True, slots=True)
class RaceOutcome:
    """What the answers so far decide: the worker to place on (None: none yet), and the
    held reason once every request went."""

    winner: str | None = None
    held_reason: str | None = None
    held_message: str = ""


def settle_race(answers: Mapping[str, ProvisioningAnswer]) -> RaceOutcome:
    """The first worker to answer Provisioned=True wins (the earliest transition, then
    the name); once none is pending or won, the reasons of the refused and expired ones
    hold the workload. No answers: nothing to decide."""
    provisioned = sorted(
        (answer.since, name)
        for name, answer in answers.items()
        if answer.state is ProvisioningState.PROVISIONED
    )
    if provisioned:
        return RaceOutcome(winner=provisioned[0][1])
    gone = sorted(
        name for name, answer in answers.items() if answer.state is ProvisioningState.GONE
    )
    if not gone or len(gone) < len(answers):
        return RaceOutcome()
    message = "; ".join(f"{name}: {answers[name].why}" for name in gone)
    return RaceOutcome(held_reason=PROVISIONING_FAILED, held_message=message)
