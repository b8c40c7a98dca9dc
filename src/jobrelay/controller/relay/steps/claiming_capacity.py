"""Claiming capacity an autoscaled worker can add, in a decision (issue 37, part 1). Pure.

The rules are steps/provisioning.py's; here they meet the snapshot. The placing step
asks, in this order: has a worker provisioned this workload's capacity (it is placed
there, whatever its nodes show now, and every other request goes)? Else the usual
placement; a workload it cannot place now that fits the nodes an autoscaled worker can
add (a worker passed over only for the fit) gets a ProvisioningRequest on up to
``--provisioning-candidates`` such workers and waits, held, naming them
(``WaitingForProvisioning``); once every request was refused or went, it is held with
their reasons (``ProvisioningFailed``; the requests stay, so none is asked again, until
the workload is placed or goes). Requests never outlive their workload: the deletion
step deletes those of a workload gone, finished, placed elsewhere, or of an earlier
object of its name; a mirror made where the workload's request was provisioned consumes
it (its pod templates carry the consume annotations).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    CreateProvisioning,
    DeleteProvisioning,
    Log,
    Plan,
    RecordEvent,
    RequeueAfter,
)
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.facts import meta, namespace, uid
from jobrelay.controller.relay.steps.placement_search import PlacedOn, Unplaceable
from jobrelay.controller.relay.steps.plan_parts import bounded, warning, without_details
from jobrelay.controller.relay.steps.provisioning import (
    PROVISIONING_FAILED,
    AutoscaledCandidate,
    ProvisioningAnswer,
    ProvisioningState,
    answer_of,
    candidate_workers,
    provisioning_objects,
    settle_race,
    workload_tag,
)
from jobrelay.placement.workload import Invalid, read_workload
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION
from jobrelay.vocabulary.placement import placement_of

__all__ = [
    "PROVISIONING_LOOK",
    "WAITING_FOR_PROVISIONING",
    "awaits_answer",
    "claim_capacity",
    "provisioned_placement",
    "requests_going",
    "with_consumed_capacity",
]

WAITING_FOR_PROVISIONING = "WaitingForProvisioning"
# Seconds between looks at a workload whose requests are pending. An answer also changes
# its worker's provisioning feed, which calls the pool's debounced capacity change (the
# held pass); this look does not depend on that pass reaching it.
PROVISIONING_LOOK = 2.0


def _answers(s: Snapshot, obj: JsonObj, usable: bool = False) -> dict[str, ProvisioningAnswer]:
    """The answers of this workload's requests, by worker (``usable``: only workers that
    may take it now: connected, not cordoned nor draining)."""
    own = uid(obj)
    return {
        w.name: answer_of(seen.request)
        for w in s.workers
        if not usable or (w.connected and w.synced and not (w.lost or w.cordoned or w.drain))
        for seen in w.provisioning
        if seen.workload_uid == own and not seen.deleting
    }


def provisioned_placement(s: Snapshot, obj: JsonObj, excluded: set[str]) -> PlacedOn | None:
    """The worker that provisioned this workload's capacity first, if one did (and may
    take it now): it goes there."""
    answers = _answers(s, obj, usable=True)
    winner = settle_race({n: a for n, a in answers.items() if n not in excluded}).winner
    if winner is None:
        return None
    workload = read_workload(s.kind, obj)
    if isinstance(workload, Invalid):
        return None  # placement says why
    return PlacedOn(winner, workload.groups)


def awaits_answer(
    s: Snapshot, obj: JsonObj, placed: PlacedOn, actions: list[Action]
) -> Plan | None:
    """Placement chose a worker that has not answered this workload's request yet (its
    added nodes may show before its answer does): it waits for that answer, so that its
    pods consume what was provisioned for them."""
    answers = _answers(s, obj)
    answer = answers.get(placed.cluster)
    if answer is None or answer.state is not ProvisioningState.PENDING:
        return None
    pending = sorted(n for n, a in answers.items() if a.state is ProvisioningState.PENDING)
    why = Unplaceable(f"{placed.cluster} has not answered its ProvisioningRequest yet", "")
    return _waiting(s, actions, pending, why)


def requests_going(
    s: Snapshot, obj: JsonObj | None, placed_on: str = "", besides: Sequence[Action] = ()
) -> Iterator[DeleteProvisioning]:
    """This workload's requests that go now: every one once it is gone or finished; those
    made for an earlier object of its name; those on workers other than ``placed_on``
    (its placement annotation's when not given); none already deleted in ``besides``.
    Workers that do not answer are skipped: their requests go when they are back (their
    keys are swept)."""
    asked = {(a.cluster, a.name) for a in besides if isinstance(a, DeleteProvisioning)}
    own = uid(obj)
    gone = obj is None or bool(meta(obj).get("deletionTimestamp"))
    finished = not gone and obj is not None and s.kind.is_finished(obj)
    where = placed_on or (placement_of(obj) if obj is not None else "")
    for worker in s.workers:
        if not worker.connected:
            continue
        for seen in worker.provisioning:
            if seen.deleting or (worker.name, seen.name) in asked:
                continue
            if gone:
                why = f"its {s.kind.ref.kind} is gone"
            elif finished:
                why = f"its {s.kind.ref.kind} has finished"
            elif seen.workload_uid != own:
                why = "it was made for an earlier object of this name"
            elif where and worker.name != where:
                why = f"the {s.kind.ref.kind} was placed on {where}"
            else:
                continue
            yield DeleteProvisioning(worker.name, seen.namespace, seen.name, seen.templates, why)


def _held(
    s: Snapshot, actions: list[Action], reason: str, message: str, signature: str, retry: float
) -> Plan:
    """Held unplaced for ``reason``: told (the not-placed annotation, an Event, the log)
    when the reason changes."""
    if signature != s.held:
        actions.append(Annotate({NOT_PLACED_ANNOTATION: bounded(f"{reason}: {message}")}))
        if reason == PROVISIONING_FAILED:
            actions.extend(warning(reason, message))
        else:
            actions.extend((RecordEvent("Normal", reason, message), Log("info", message)))
    return Plan(tuple(actions), RequeueAfter(retry), held=signature)


def _waiting(s: Snapshot, actions: list[Action], workers: list[str], why: Unplaceable) -> Plan:
    asked = ", ".join(workers)
    message = (
        f"no worker cluster can take this {s.kind.ref.kind} now ({why.explanation}); "
        f"capacity for it was requested from {asked} (ProvisioningRequest), and it is "
        f"placed on the first to provision it"
    )
    return _held(s, actions, WAITING_FOR_PROVISIONING, message, f"Provisioning|{asked}",
                 PROVISIONING_LOOK)  # fmt: skip


def claim_capacity(
    s: Snapshot, obj: JsonObj, why: Unplaceable, actions: list[Action]
) -> Plan | None:
    """For a workload placement cannot place now: its requests' state (held waiting on
    them, or for their refusals), or new requests on the autoscaled workers whose added
    nodes it fits; None when no autoscaled worker can help (placement's hold then)."""
    answers = _answers(s, obj)
    if answers:
        outcome = settle_race(answers)
        if outcome.held_reason is not None:
            message = (
                f"no worker cluster can take this {s.kind.ref.kind} now ({why.explanation}), "
                f"and every worker asked for capacity refused or gave it up: "
                f"{outcome.held_message}"
            )
            signature = f"{outcome.held_reason}|{without_details(outcome.held_message)}"
            return _held(s, actions, outcome.held_reason, message, signature,
                         s.settings.unplaceable_retry)  # fmt: skip
        pending = sorted(n for n, a in answers.items() if a.state is ProvisioningState.PENDING)
        return _waiting(s, actions, pending or sorted(answers), why)
    if why.unknown or not why.misfits:
        return None
    workload = read_workload(s.kind, obj)
    own = uid(obj)
    if isinstance(workload, Invalid) or not own:
        return None
    by_name = {w.name: w for w in s.workers}
    passed_over = [by_name[name] for name in why.misfits if name in by_name]
    candidates = candidate_workers(
        workload.groups,
        [
            AutoscaledCandidate(worker.name, worker.autoscaling, worker.open_requests)
            for worker in passed_over
            if worker.autoscaling is not None
        ],
        s.settings.provisioning_candidates,
    )
    templates = s.kind.pod_templates(obj)
    counts = [pod_set.count for pod_set in s.kind.pod_sets(obj)]
    if not candidates or not templates or len(templates) != len(counts):
        return None
    for name in candidates:
        autoscaling = by_name[name].autoscaling
        assert autoscaling is not None  # candidates have it
        made, request = provisioning_objects(
            own, namespace(obj), list(zip(templates, counts, strict=True)),
            autoscaling.provisioning_class_name,
        )  # fmt: skip
        tag = {api.PROVISIONING_WORKLOAD_ANNOTATION: workload_tag(s.key.kind, s.key.key)}
        for made_object in (*made, request):
            made_object["metadata"]["annotations"] = dict(tag)
        actions.append(CreateProvisioning(name, namespace(obj), tuple(made), request))
    return _waiting(s, actions, list(candidates), why)


def with_consumed_capacity(
    s: Snapshot, obj: JsonObj, worker: WorkerSnapshot, body: JsonObj
) -> JsonObj:
    """The mirror's body, its pods consuming the capacity provisioned for the workload on
    ``worker`` (the consume annotations on its pod templates), when there is such."""
    own = uid(obj)
    for seen in worker.provisioning:
        if seen.workload_uid != own or seen.deleting:
            continue
        if answer_of(seen.request).state is not ProvisioningState.PROVISIONED:
            continue
        body = copy.deepcopy(body)
        annotations = api.consuming_annotations(seen.name, seen.class_name)
        for template in s.kind.pod_templates(body):
            template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
        return body
    return body
