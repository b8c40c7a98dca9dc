"""Hostile management objects and mirrors, through every kind and the whole decision.

Users write the management object (any annotation, any name the schema lets
through, a status with impossible values if they may write status); workers
write the mirror (any JSON). Deciding never raises and ends fast: what cannot
be read ends as Terminal ``StatusNotCopied``, never as a crash that would wedge
the workload. A status written for a Job passes the Job contract checker.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import (
    JOB,
    JOBSET,
    NOW,
    WIDGET,
    job,
    jobset,
    mirror,
    snapshot,
    widget,
    worker,
)
from tests.unit.fuzz.hostile import (
    anything,
    counted,
    fuzz,
    management_statuses,
    names,
    user_annotations,
    worker_maps,
    worker_statuses,
)

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import Terminal, WriteStatus
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.vocabulary.json_types import JsonObj


def ecosystem(name: str, spec: JsonObj) -> tuple[WorkloadKind, Any]:
    """An ecosystem kind's adapter and a maker of its objects, like ``widget``."""
    kind = DEDICATED[name]

    def make(*, placed: str | None = None, status: JsonObj | None = None) -> JsonObj:
        obj = widget(placed=placed, status=status)
        obj.update(apiVersion=kind.ref.api_version, kind=kind.ref.kind, spec=copy.deepcopy(spec))
        return obj

    return kind, make


_TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
_RAY = {"headGroupSpec": {"template": _TEMPLATE},
        "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "template": _TEMPLATE}]}  # fmt: skip
KINDS: dict[str, tuple[WorkloadKind, Any]] = {
    "Job": (JOB, job),
    "JobSet": (JOBSET, jobset),
    "Widget": (WIDGET, widget),
    "RayJob": ecosystem("RayJob.v1.ray.io", {"managedBy": "m", "rayClusterSpec": _RAY}),
    "RayCluster": ecosystem("RayCluster.v1.ray.io", {"managedBy": "m", **_RAY}),
    "TrainJob": ecosystem(
        "TrainJob.v1alpha1.trainer.kubeflow.org",
        {
            "managedBy": "m",
            "runtimeRef": {"name": "r"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    ),
    "PyTorchJob": ecosystem(
        "PyTorchJob.v1.kubeflow.org",
        {
            "runPolicy": {"managedBy": "m"},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": _TEMPLATE}},
        },
    ),
    "MPIJob": ecosystem(
        "MPIJob.v2beta1.kubeflow.org",
        {
            "runPolicy": {"managedBy": "m"},
            "mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": _TEMPLATE}},
        },
    ),
}
# What a management object's reading may raise: the documented "unreadable" errors.
UNREADABLE = (TypeError, ValueError, AttributeError, KeyError, IndexError)


def hostile_object(
    make: Any, placed: str | None, annotations: dict[str, str], name: str, status: JsonObj | None
) -> JsonObj:
    obj: JsonObj = make(placed=placed, status=status)
    meta = obj["metadata"]
    meta["name"] = name
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    return obj


def hostile_mirror(kind: WorkloadKind, obj: JsonObj, labels: Any, annotations: Any,
                   status: Any, keep_marks: bool) -> JsonObj:  # fmt: skip
    made = copy.deepcopy(mirror(obj, kind=kind))
    meta = made["metadata"]
    if keep_marks and isinstance(labels, dict):
        labels = {**meta.get("labels", {}), **labels}
    meta["labels"], meta["annotations"] = labels, annotations
    made["status"] = status
    return made


@fuzz(700)
@given(
    kind_name=st.sampled_from(list(KINDS)),
    placed=st.sampled_from([None, "w1", "w2", "", "gone"]),
    annotations=user_annotations,
    name=names,
    obj_status=st.none() | management_statuses,
    labels=worker_maps,
    mirror_annotations=worker_maps,
    mirror_status=worker_statuses,
    keep_marks=st.booleans(),
    where=st.sampled_from(["mirror", "vanished", "read", "none"]),
    fresh=st.booleans(),
)
@counted
def test_deciding_on_hostile_objects_never_raises(
    kind_name: str, placed: str | None, annotations: dict[str, str], name: str,
    obj_status: JsonObj | None, labels: Any, mirror_annotations: Any, mirror_status: Any,
    keep_marks: bool, where: str, fresh: bool,
) -> None:  # fmt: skip
    kind, make = KINDS[kind_name]
    obj = hostile_object(make, placed, annotations, name, obj_status)
    theirs = hostile_mirror(kind, obj, labels, mirror_annotations, mirror_status, keep_marks)
    given_obj, given_mirror = copy.deepcopy(obj), copy.deepcopy(theirs)
    w1 = {
        "mirror": worker("w1", mirror=theirs),
        "vanished": worker("w1", vanished=theirs),
        "read": worker("w1", read=theirs),
        "none": worker("w1"),
    }[where]
    plan = decide(snapshot(obj, w1, worker("w2"), kind=kind, fresh=fresh))
    assert (obj, theirs) == (given_obj, given_mirror), "decide changed its input"
    for action in plan.actions:
        if isinstance(action, WriteStatus) and kind is JOB:
            assert JOB.status_violations(obj, {**obj, "status": action.status}) == []
    if isinstance(plan.outcome, Terminal):
        assert plan.outcome.reason in {"StatusNotCopied", "Failed", "Completed"} or plan.outcome


@fuzz(700)
@given(
    kind_name=st.sampled_from(list(KINDS)),
    annotations=user_annotations,
    name=names,
    obj_status=st.none() | management_statuses,
    spec_junk=st.dictionaries(
        st.sampled_from(["completions", "parallelism", "backoffLimit", "suspend",
                         "activeDeadlineSeconds", "completionMode", "backoffLimitPerIndex",
                         "replicatedJobs", "template", "size"]),
        anything, max_size=3,
    ),
    mirror_status=worker_statuses,
    gone=st.booleans(),
)  # fmt: skip
@counted
def test_each_kind_reads_hostile_objects_or_raises_only_unreadable(
    kind_name: str, annotations: dict[str, str], name: str, obj_status: JsonObj | None,
    spec_junk: dict[str, Any], mirror_status: Any, gone: bool,
) -> None:  # fmt: skip
    """The kinds' pure functions, with a spec no apiserver would take too: they either
    answer or raise one of the errors decide turns into StatusNotCopied (a status they
    build from nonsense is judged by the contract checker: decide's test above shows
    that no status it flags is written)."""
    kind, make = KINDS[kind_name]
    obj = hostile_object(make, "w1", annotations, name, obj_status)
    theirs = copy.deepcopy(mirror(obj, kind=kind))
    theirs["status"] = mirror_status
    obj["spec"] = {**obj["spec"], **spec_junk}
    calls = (
        lambda: kind.build_mirror(obj, controller_name="c", origin="o", run=2, now=NOW),
        lambda: kind.slim_mirror(theirs),
        lambda: kind.spec_patch(obj, theirs),
        lambda: kind.finish(theirs),
        lambda: kind.is_suspended(obj),
        lambda: kind.has_started(theirs),
        lambda: kind.pod_sets(obj),
        lambda: kind.failed_status(obj, "Why", "because", now=NOW),
    )
    for call in calls:
        with contextlib.suppress(*UNREADABLE):
            call()
    try:
        status = kind.next_status(obj, theirs, now=NOW, gone=gone)
        if status is not None:  # decide's guard: it flags or raises, and decide refuses it
            kind.status_violations(obj, {**obj, "status": status})
    except UNREADABLE:
        pass
