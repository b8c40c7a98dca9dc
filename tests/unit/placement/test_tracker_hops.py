"""Pods made by an object a mirror controls (an owner hop) count as the mirror's, by UID:
a RayJob's RayCluster and submitter Job, an MPIJob's launcher Job, a TrainJob's JobSet
(whose pods are its child Jobs' and carry the JobSet's UID label); a namesake hop that
someone else made there speaks for nobody."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.fleet.workers.hop_feed import hop_controllers
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kinds.job.pod_labels import JOB_NAME_LABEL, JOB_UID_LABEL
from jobrelay.kinds.jobset import JOBSET_NAME_LABEL, JOBSET_UID_LABEL
from jobrelay.kinds.ray import RAY_CLUSTER_LABEL
from jobrelay.placement.slim_objects import slim_hop, slim_pod
from jobrelay.placement.tracker import CapacityTracker, OwnedPods
from jobrelay.vocabulary.resource import Resource

BY_KIND = {kind.ref.kind: kind.ref for kind in DEDICATED.values()}
JOB, JOBSET, RAYJOB, RAYCLUSTER, TRAINJOB, MPIJOB = (
    BY_KIND[name] for name in ("Job", "JobSet", "RayJob", "RayCluster", "TrainJob", "MPIJob")
)
CRONJOB = Resource("batch", "v1", "cronjobs", "CronJob")
# What a worker's hop feed keeps, with every dedicated kind configured.
CONTROLLERS = hop_controllers(DEDICATED.values())
NS = "team-a"
T1, T2 = "2026-03-01T12:00:00Z", "2026-03-01T12:05:00Z"

Owner = tuple[Resource, str, str]  # a controller: its resource, name and UID


def made(
    ref: Resource, name: str, uid: str, by: Owner | None = None, **labels: str
) -> dict[str, Any]:
    """An object of ``ref`` as the worker's apiserver serves it, controlled by ``by``."""
    refs = []
    if by is not None:
        owner_ref, owner_name, owner_uid = by
        refs = [{"apiVersion": owner_ref.api_version, "kind": owner_ref.kind,
                 "name": owner_name, "uid": owner_uid, "controller": True,
                 "blockOwnerDeletion": True}]  # fmt: skip
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "1",
                     "labels": labels, "ownerReferences": refs},
        "spec": {},
    }  # fmt: skip


def pod(
    name: str, by: Owner | None, *, node: str = "", since: str | None = None, **labels: str
) -> dict[str, Any]:
    obj = made(Resource("", "v1", "pods", "Pod"), name, f"pod-{name}", by, **labels)
    obj["spec"] = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    if node:
        obj["spec"]["nodeName"] = node
    conditions = []
    if since:
        conditions.append({"type": "PodScheduled", "status": "False",
                           "reason": "Unschedulable", "lastTransitionTime": since})  # fmt: skip
    obj["status"] = {"phase": "Running" if node else "Pending", "conditions": conditions}
    return obj


def job_pod(name: str, job: Owner, **kwargs: Any) -> dict[str, Any]:
    """A Job's pod, labelled as the Job controller labels it."""
    return pod(name, job, **{JOB_NAME_LABEL: job[1], JOB_UID_LABEL: job[2]}, **kwargs)


def hop_key(ref: Resource, obj: dict[str, Any]) -> str:
    return f"{ref.plural}.{ref.group}/{NS}/{obj['metadata']['name']}"


def feed_hop(tracker: CapacityTracker, ref: Resource, obj: dict[str, Any]) -> bool:
    """As the hop feed hands one to the tracker (its informer's transform, then the key)."""
    return tracker.set_hop(hop_key(ref, obj), slim_hop(obj, CONTROLLERS.get(ref, frozenset())))


def feed_pod(tracker: CapacityTracker, obj: dict[str, Any]) -> bool:
    return tracker.set_pod(f"{NS}/{obj['metadata']['name']}", slim_pod(obj))


# -- each kind, as its operator makes its pods ----------------------------------------------

RAYJOB_M: Owner = (RAYJOB, "train", "rj-uid")
RAY_CLUSTER: Owner = (RAYCLUSTER, "train-x8k2p", "rc-uid")
SUBMITTER: Owner = (JOB, "train", "submitter-uid")
MPIJOB_M: Owner = (MPIJOB, "train", "mpi-uid")
LAUNCHER: Owner = (JOB, "train-launcher", "launcher-uid")
TRAINJOB_M: Owner = (TRAINJOB, "train", "tj-uid")
TRAIN_JOBSET: Owner = (JOBSET, "train", "js-uid")
CHILD_JOB: Owner = (JOB, "train-node-0", "child-uid")
RAYCLUSTER_M: Owner = (RAYCLUSTER, "serve", "rcm-uid")
JOBSET_LABELS = {JOBSET_NAME_LABEL: "train", JOBSET_UID_LABEL: "js-uid"}

# kind -> (the mirror, the hops made from it, the pods, its pods without and with the hops)
KINDS: dict[str, tuple[Owner, list[tuple[Resource, dict[str, Any]]], list[dict[str, Any]],
                       OwnedPods, OwnedPods]] = {
    "RayJob: its RayCluster's head and worker pods, and its submitter Job's pod": (
        RAYJOB_M,
        [(RAYCLUSTER, made(*RAY_CLUSTER, RAYJOB_M)), (JOB, made(*SUBMITTER, RAYJOB_M))],
        [
            pod("train-x8k2p-head", RAY_CLUSTER, node="n1", **{RAY_CLUSTER_LABEL: "train-x8k2p"}),
            pod("train-x8k2p-worker-a", RAY_CLUSTER, since=T1,
                **{RAY_CLUSTER_LABEL: "train-x8k2p"}),
            job_pod("train-abcde", SUBMITTER, since=T2),
        ],
        OwnedPods(),
        OwnedPods(3, 1, True, T1),
    ),
    "MPIJob: its workers are its own, its launcher pod its launcher Job's": (
        MPIJOB_M,
        [(JOB, made(*LAUNCHER, MPIJOB_M))],
        [
            pod("train-worker-0", MPIJOB_M, node="n1"),
            pod("train-worker-1", MPIJOB_M, node="n2"),
            job_pod("train-launcher-xyz", LAUNCHER, since=T2),
        ],
        OwnedPods(2, 2, True, None),
        OwnedPods(3, 2, True, T2),
    ),
    "TrainJob: its JobSet's pods (owned by the child Jobs, labelled with the JobSet's UID)": (
        TRAINJOB_M,
        [
            (JOBSET, made(*TRAIN_JOBSET, TRAINJOB_M)),
            # A JobSet's child Job reaches the Job hop informer too: none of a mirror's.
            (JOB, made(*CHILD_JOB, TRAIN_JOBSET, **JOBSET_LABELS)),
        ],
        [
            job_pod("train-node-0-0-a", CHILD_JOB, node="n1", **JOBSET_LABELS),
            job_pod("train-node-0-1-b", CHILD_JOB, since=T1, **JOBSET_LABELS),
        ],
        OwnedPods(),
        OwnedPods(2, 1, True, T1),
    ),
    "RayCluster: its pods are its own (no hop)": (
        RAYCLUSTER_M,
        [],
        [pod("serve-head", RAYCLUSTER_M, node="n1", **{RAY_CLUSTER_LABEL: "serve"})],
        OwnedPods(1, 1, True, None),
        OwnedPods(1, 1, True, None),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", KINDS)
def test_every_kinds_pods_count_for_its_mirror(case: str) -> None:
    (_, name, uid), hops, pods, without, with_hops = KINDS[case]
    tracker = CapacityTracker()
    for obj in pods:
        feed_pod(tracker, obj)
    assert tracker.pods_of(NS, name, uid) == without
    for ref, obj in hops:
        feed_hop(tracker, ref, obj)
    assert tracker.pods_of(NS, name, uid) == with_hops
    # Its stuck pods are its own: the pending timeout looks at the mirror.
    stuck = [key for key in tracker.unschedulable() if key[1:] == (name, uid)]
    assert stuck == ([(NS, name, uid)] if with_hops.unschedulable_since else [])
    # The hops go (the mirror was suspended, say): their pods are nobody's of it.
    for ref, obj in hops:
        tracker.delete_hop(hop_key(ref, obj))
    assert tracker.pods_of(NS, name, uid) == without


@pytest.mark.parametrize(
    ("case", "cluster"),
    [
        ("made by hand", made(*RAY_CLUSTER)),
        ("a tenant's RayJob of the same name", made(*RAY_CLUSTER, (RAYJOB, "train", "tenant"))),
        ("not a RayJob's", made(*RAY_CLUSTER, (CRONJOB, "train", "rj-uid"))),
        ("owned, not controlled", {**made(*RAY_CLUSTER), "metadata": {
            **made(*RAY_CLUSTER)["metadata"],
            "ownerReferences": [{"apiVersion": RAYJOB.api_version, "kind": RAYJOB.kind,
                                 "name": "train", "uid": "rj-uid"}]}}),
    ],
)  # fmt: skip
def test_a_namesake_hop_speaks_for_nobody(case: str, cluster: dict[str, Any]) -> None:
    """The RayCluster the mirror's status names, made by someone else there."""
    del case
    tracker = CapacityTracker()
    feed_hop(tracker, RAYCLUSTER, cluster)
    feed_pod(tracker, pod("train-x8k2p-head", RAY_CLUSTER, since=T1))
    assert tracker.pods_of(NS, "train", "rj-uid") == OwnedPods()
    # Its stuck pod is reported for its own owner, as before there were hops.
    owner = next((o for o in tracker.unschedulable()), None)
    assert owner in ((NS, "train", "tenant"), (NS, "train-x8k2p", "rc-uid"))
    assert owner != (NS, "train", "rj-uid")


def test_a_namesake_job_of_the_mirrors_name_is_not_its_submitter() -> None:
    tracker = CapacityTracker()
    cron_job: Owner = (JOB, "train", "cron-made")
    feed_hop(tracker, JOB, made(*cron_job, (CRONJOB, "nightly", "cron-uid")))
    feed_pod(tracker, job_pod("train-1", cron_job, node="n1"))
    assert tracker.pods_of(NS, "train", "rj-uid") == OwnedPods()
    assert tracker.pods_of(NS, "train", "cron-made") == OwnedPods(1, 1, True, None)


def test_slim_hop_keeps_identity_and_controller_only() -> None:
    submitter = made(*SUBMITTER, RAYJOB_M, **{"ray.io/originated-from-crd": "RayJob"})
    assert slim_hop(submitter, CONTROLLERS[JOB]) == {
        "metadata": {
            "name": "train", "namespace": NS, "uid": "submitter-uid", "resourceVersion": "1",
            "ownerReferences": [{"name": "train", "uid": "rj-uid", "controller": True}],
        }
    }  # fmt: skip
    assert slim_hop(made(*SUBMITTER), CONTROLLERS[JOB]) is None
    assert slim_hop(made(JOB, "train", "", RAYJOB_M), CONTROLLERS[JOB]) is None
    assert slim_hop(made(*SUBMITTER, (RAYJOB, "", "rj-uid")), CONTROLLERS[JOB]) is None
    # The hop resource's own kinds only: a TrainJob makes no RayClusters.
    assert slim_hop(made(*RAY_CLUSTER, TRAINJOB_M), CONTROLLERS[RAYCLUSTER]) is None


def test_a_hop_changing_controller_moves_its_pods() -> None:
    tracker = CapacityTracker()
    feed_pod(tracker, pod("head", RAY_CLUSTER, node="n1"))
    assert feed_hop(tracker, RAYCLUSTER, made(*RAY_CLUSTER, RAYJOB_M))
    assert not feed_hop(tracker, RAYCLUSTER, made(*RAY_CLUSTER, RAYJOB_M))  # the same tie
    assert tracker.pods_of(NS, "train", "rj-uid").total == 1
    assert feed_hop(tracker, RAYCLUSTER, made(*RAY_CLUSTER, (RAYJOB, "other", "o-uid")))
    assert tracker.pods_of(NS, "train", "rj-uid") == OwnedPods()
    assert tracker.pods_of(NS, "other", "o-uid").total == 1
    # Left out by the transform (its controller let go): as deleted.
    assert feed_hop(tracker, RAYCLUSTER, made(*RAY_CLUSTER))
    assert tracker.pods_of(NS, "other", "o-uid") == OwnedPods()
    assert not tracker.delete_hop(hop_key(RAYCLUSTER, made(*RAY_CLUSTER)))


# -- a property: the same answers as counting from scratch -------------------------------

MIRROR = ("train", "m-uid")
OTHER = ("train", "o-uid")  # a namesake RayJob there
HOPS = {0: (RAYCLUSTER, "train-x8k2p", "h0"), 1: (JOB, "train", "h1")}
# Whom a pod's controller is: the mirror itself, hop 0 or 1, or a stranger.
POD_OWNERS: dict[str, Owner] = {
    "mirror": (RAYJOB, *MIRROR), "hop0": HOPS[0], "hop1": HOPS[1],
    "stranger": (JOB, "x", "x-uid"),
}  # fmt: skip
HOP_STATES = ("gone", "ours", "namesake's", "uncontrolled")

hop_op = st.tuples(st.just("hop"), st.sampled_from(sorted(HOPS)), st.sampled_from(HOP_STATES))
pod_op = st.tuples(
    st.just("pod"),
    st.integers(0, 3),
    st.sampled_from(sorted(POD_OWNERS)),
    st.booleans(),
    st.sampled_from([None, T1, T2]),
)
gone_op = st.tuples(st.just("gone"), st.integers(0, 3))


def _hop_obj(index: int, state: str) -> dict[str, Any]:
    by = {"ours": (RAYJOB, *MIRROR), "namesake's": (RAYJOB, *OTHER)}.get(state)
    return made(*HOPS[index], by)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(hop_op, pod_op, gone_op), max_size=30))
def test_pods_of_and_unschedulable_match_a_count_from_scratch(ops: list[Any]) -> None:
    tracker = CapacityTracker()
    hops: dict[int, str] = {}
    pods: dict[int, tuple[str, bool, str | None]] = {}
    for op in ops:
        if op[0] == "hop":
            _, index, state = op
            ref = HOPS[index][0]
            if state == "gone":
                tracker.delete_hop(hop_key(ref, _hop_obj(index, state)))
                hops.pop(index, None)
            else:
                feed_hop(tracker, ref, _hop_obj(index, state))
                hops[index] = state
        elif op[0] == "pod":
            _, index, owner, bound, since = op
            feed_pod(tracker, pod(f"p{index}", POD_OWNERS[owner], node="n1" if bound else "",
                                  since=since))  # fmt: skip
            pods[index] = (owner, bound, since)
        else:
            tracker.delete_pod(f"{NS}/p{op[1]}")
            pods.pop(op[1], None)

    def whose(owner: str) -> tuple[str, str, str]:
        """Whom a pod counts for, from scratch: a hop's controller while it has one."""
        _, name, uid = POD_OWNERS[owner]
        if owner.startswith("hop"):
            state = hops.get(int(owner[-1]))
            if state == "ours":
                return (NS, *MIRROR)
            if state == "namesake's":
                return (NS, *OTHER)
        return (NS, name, uid)

    mine = [
        (bound, since) for owner, bound, since in pods.values() if whose(owner) == (NS, *MIRROR)
    ]
    stuck = [since for bound, since in mine if since and not bound]
    assert tracker.pods_of(NS, *MIRROR) == OwnedPods(
        len(mine), sum(bound for bound, _ in mine), any(bound for bound, _ in mine),
        min(stuck, default=None),
    )  # fmt: skip
    for name in ("train", "x", "train-x8k2p"):  # by name, under any UID (a run gone)
        counted = any(name in (whose(owner)[1], POD_OWNERS[owner][1])  # its own, or a hop's
                      for owner, _bound, _since in pods.values())  # fmt: skip
        assert tracker.holds_pods_named(NS, name) is counted, name
    expected = {whose(owner) for owner, bound, since in pods.values() if since and not bound}
    found = tracker.unschedulable()
    assert len(found) == len(set(found)) and set(found) == expected
    # Everything gone: nothing is kept (its memory is bounded by what exists).
    for index in list(pods):
        tracker.delete_pod(f"{NS}/p{index}")
    for index in HOPS:
        tracker.delete_hop(hop_key(HOPS[index][0], _hop_obj(index, "gone")))
    assert len(tracker) == 0 and tracker.unschedulable() == []
    assert (tracker._owners, tracker._hops, tracker._controller_of, tracker._hops_of,
            tracker._uids_named) == ({}, {}, {}, {}, {})  # fmt: skip
