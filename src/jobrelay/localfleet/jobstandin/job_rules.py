"""What the built-in Job controller would do next to one batch/v1 Job (pure): which pods
to make (NonIndexed and Indexed completion), on which node, which to delete, and the
status to write, keeping the apiserver's Job status rules
(/work/shared/docs/job-api-contract.md): startTime, active, ready, succeeded, failed,
SuccessCriteriaMet then Complete with completionTime, FailureTarget then Failed, and
Suspended.

Simplifications (docs/local-fleet.md): failed pods are replaced at once (no back-off
delay); backoffLimit is the only failure rule (no podFailurePolicy, backoffLimitPerIndex,
activeDeadlineSeconds, successPolicy or podReplacementPolicy); pods are placed on nodes
by name, round-robin, without looking at capacity.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.job.pod_labels import COMPLETION_INDEX_LABEL
from jobrelay.localfleet.jobstandin.pod_rules import TERMINAL, phase_of
from jobrelay.localfleet.jobstandin.pod_rules import is_ready as pod_is_ready
from jobrelay.vocabulary.timestamps import rfc3339

# The same key names the pod's label and annotation.
INDEX_ANNOTATION = COMPLETION_INDEX_LABEL
JOB = JobKind.ref
JOB_CONTROLLER = "kubernetes.io/job-controller"
DEFAULT_BACKOFF_LIMIT = 6
_UID_CHARS = 5


@dataclass(frozen=True)
class PodToMake:
    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class JobPlan:
    """Pods to make and to delete (by name), and the whole status to write (None: none)."""

    make: tuple[PodToMake, ...] = ()
    delete: tuple[str, ...] = ()
    status: dict[str, Any] | None = None


NOTHING = JobPlan()


def _conditions(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in status.get("conditions") or []]


def _true(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _set(
    conditions: list[dict[str, Any]], kind: str, status: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """The Job controller's condition update: the transition time moves only on a change."""
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != status:
                condition.update(status=status, lastTransitionTime=now)
            condition.update(reason=reason, message=message, lastProbeTime=now)
            return conditions
    conditions.append(
        {"type": kind, "status": status, "reason": reason, "message": message,
         "lastProbeTime": now, "lastTransitionTime": now}
    )  # fmt: skip
    return conditions


def is_ours(job: Mapping[str, Any]) -> bool:
    """As the built-in controller: spec.managedBy absent or its own value."""
    manager = (job.get("spec") or {}).get("managedBy")
    return not manager or manager == JOB_CONTROLLER


def is_finished(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return _true(conditions, "Complete") or _true(conditions, "Failed")


def _index_of(pod: Mapping[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_ANNOTATION)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def compress_indexes(indexes: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``: completedIndexes' form."""
    parts: list[str] = []
    ordered = sorted(set(indexes))
    start = previous = None
    for index in [*ordered, None]:
        if index is not None and previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = index
    return ",".join(parts)


def _pod(job: Mapping[str, Any], name: str, node: str, index: int | None) -> PodToMake:
    meta = job["metadata"]
    template = (job.get("spec") or {}).get("template") or {}
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    annotations = dict(template_meta.get("annotations") or {})
    if index is not None:
        labels[INDEX_ANNOTATION] = str(index)
        annotations[INDEX_ANNOTATION] = str(index)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": JOB.api_version,
                    "kind": JOB.kind,
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**(template.get("spec") or {}), "nodeName": node},
    }
    return PodToMake(name, body)


def plan_job(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[str],
    now: datetime.datetime,
) -> JobPlan:
    """What the Job controller does next to ``job``, whose pods (those it controls) are
    ``pods``, on a cluster whose Ready nodes are ``nodes``."""
    meta = job.get("metadata") or {}
    if not is_ours(job) or meta.get("deletionTimestamp"):
        return NOTHING
    spec = job.get("spec") or {}
    status = dict(job.get("status") or {})
    stamp = rfc3339(now)
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    active = [p for p in live if phase_of(p) not in TERMINAL]
    active_names = tuple(str(p["metadata"]["name"]) for p in active)
    if is_finished(job):
        # A finished Job's leftover pods go (the controller deletes them on finishing).
        return JobPlan(delete=active_names)
    conditions = _conditions(status)
    if spec.get("suspend") is True:
        conditions = _set(conditions, "Suspended", "True", "JobSuspended", "Job suspended", stamp)
        new = {**status, "conditions": conditions, "active": 0, "ready": 0}
        new.pop("startTime", None)
        return JobPlan(delete=active_names, status=_changed(status, new))
    if _true(conditions, "Suspended"):
        conditions = _set(conditions, "Suspended", "False", "JobResumed", "Job resumed", stamp)
    succeeded_pods = [p for p in pods if phase_of(p) == "Succeeded"]
    failed = max(int(status.get("failed") or 0), sum(phase_of(p) == "Failed" for p in pods))
    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1) or 0)
    done_indexes = sorted(
        {i for p in succeeded_pods if (i := _index_of(p)) is not None
         and (completions is None or i < completions)}
    )  # fmt: skip
    succeeded = max(
        int(status.get("succeeded") or 0), len(done_indexes) if indexed else len(succeeded_pods)
    )
    new = {**status, "startTime": status.get("startTime") or stamp, "failed": failed,
           "succeeded": succeeded}  # fmt: skip
    if indexed:
        new["completedIndexes"] = compress_indexes(done_indexes)
    if failed > int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)):
        reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        for kind in ("FailureTarget", "Failed"):
            conditions = _set(conditions, kind, "True", reason, message, stamp)
        new |= {"conditions": conditions, "active": 0, "ready": 0}
        return JobPlan(delete=active_names, status=_changed(status, new))
    if completions is None:
        complete = succeeded > 0 and not active
    else:
        complete = succeeded >= int(completions)
    if complete:
        reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        for kind in ("SuccessCriteriaMet", "Complete"):
            conditions = _set(conditions, kind, "True", reason, message, stamp)
        new |= {"conditions": conditions, "active": 0, "ready": 0, "completionTime": stamp}
        return JobPlan(delete=active_names, status=_changed(status, new))
    make = _pods_to_make(job, pods, active, nodes, indexed, completions, parallelism, succeeded)
    new |= {
        "conditions": conditions,
        "active": len(active) + len(make),
        "ready": sum(pod_is_ready(p) for p in active),
    }
    if not new["conditions"]:
        new.pop("conditions")
    return JobPlan(make=make, status=_changed(status, new))


def _changed(old: Mapping[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    return None if dict(old) == new else new


def _pods_to_make(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    active: Sequence[Mapping[str, Any]],
    nodes: Sequence[str],
    indexed: bool,
    completions: int | None,
    parallelism: int,
    succeeded: int,
) -> tuple[PodToMake, ...]:
    if not nodes:
        return ()  # no scheduler would place them either: wait for a node
    meta = job["metadata"]
    prefix = f"{meta['name']}-{str(meta.get('uid') or '')[:_UID_CHARS]}"
    taken = {str(p["metadata"]["name"]) for p in pods}
    wanted: list[int | None]
    if indexed and completions is not None:
        busy = {_index_of(p) for p in active}
        done = {_index_of(p) for p in pods if phase_of(p) == "Succeeded"}
        free = [i for i in range(int(completions)) if i not in busy and i not in done]
        wanted = list(free[: max(0, parallelism - len(active))])
    elif completions is None:
        # A work queue: parallelism pods until the first one succeeds.
        wanted = [None] * (max(0, parallelism - len(active)) if succeeded == 0 else 0)
    else:
        remaining = int(completions) - succeeded
        wanted = [None] * max(0, min(parallelism, remaining) - len(active))
    made: list[PodToMake] = []
    attempt = 0
    for index in wanted:
        base = prefix if index is None else f"{prefix}-{index}"
        while f"{base}-{attempt}" in taken:
            attempt += 1
        name = f"{base}-{attempt}"
        taken.add(name)
        node = nodes[len(taken) % len(nodes)]
        made.append(_pod(job, name, node, index))
        if index is not None:
            attempt = 0
    return tuple(made)
