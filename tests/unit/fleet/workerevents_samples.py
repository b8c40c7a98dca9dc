"""Worker Events, mirrors and pods as the worker Event tests use them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobrelay.kinds import kinds_from_names
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL

KINDS = {kind.name: kind for kind in kinds_from_names(
    ["Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io", "RayJob.v1.ray.io",
     "MPIJob.v2beta1.kubeflow.org", "TrainJob.v1alpha1.trainer.kubeflow.org"]
)}  # fmt: skip
JOB, JOBSET, RAYJOB, MPIJOB, TRAINJOB = (kind.ref for kind in KINDS.values())
CREATED = "2026-11-23T08:00:00Z"


def mirror(name: str, uid: str, created: str = CREATED, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "creationTimestamp": created,
                     "labels": {ORIGIN_UID_LABEL: f"origin-{uid}"}},
        "status": status,
    }  # fmt: skip


MIRRORS = {
    (JOB.name, "ns/train"): mirror("train", "uid-train"),
    (JOB.name, "ns/train-2"): mirror("train-2", "uid-train-2"),
    (JOBSET.name, "ns/sweep"): mirror("sweep", "uid-sweep"),
    (RAYJOB.name, "ns/ray"): mirror("ray", "uid-ray"),
    (MPIJOB.name, "ns/mpi"): mirror("mpi", "uid-mpi"),
    (TRAINJOB.name, "ns/tj"): mirror("tj", "uid-tj"),
}
# Pods the worker knows, by namespace/name: their UID and the (name, UID) they speak for.
PODS: dict[str, tuple[str, frozenset[tuple[str, str]]]] = {
    "ns/train-2-abcde": ("p-1", frozenset({("train-2", "uid-train-2")})),
    "ns/other-xyz12": ("p-2", frozenset({("other", "uid-other")})),
    # Carries the mirror's name (a label), not its UID: a namesake's, or made up.
    "ns/train-fake1": ("p-3", frozenset({("train", "uid-someone-else")})),
    "ns/train-bare1": ("p-4", frozenset()),
    "ns/sweep-workers-0-1-abcde": (
        "p-5", frozenset({("sweep-workers-0", "uid-child"), ("sweep", "uid-sweep")})
    ),
}  # fmt: skip


def lookup(key: tuple[str, str]) -> Mapping[str, Any] | None:
    return MIRRORS.get(key)


def pod_owners(namespace: str, name: str) -> tuple[str, frozenset[tuple[str, str]]] | None:
    return PODS.get(f"{namespace}/{name}")


def event(
    kind: str = "Job",
    name: str = "train",
    *,
    api_version: str = "batch/v1",
    uid: str = "ev-1",
    involved_uid: str | None = None,
    reason: str = "FailedCreate",
    message: str = 'Error creating: pods "train-x" is forbidden: exceeded quota',
    count: int | None = 1,
    last: str | None = "2026-11-23T08:00:05Z",
    namespace: str = "ns",
    **extra: Any,
) -> dict[str, Any]:
    involved: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "namespace": namespace,
    }
    if involved_uid is not None:
        involved["uid"] = involved_uid
    obj: dict[str, Any] = {
        "metadata": {"name": f"{name}.1", "namespace": namespace, "uid": uid},
        "involvedObject": involved,
        "type": "Warning",
        "reason": reason,
        "message": message,
        **extra,
    }
    if count is not None:
        obj["count"] = count
    if last is not None:
        obj["lastTimestamp"] = last
    return obj
