"""Each kind's pods on a worker, as its adapter says: listed by its selectors, the
mirror's by UID (its own, or that of an object it controls there), never by name."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds import kinds_from_names
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED, DEFAULT_FINISHED_CONDITIONS
from jobrelay.kinds.generic import GenericKind
from jobrelay.kinds.mirror_pods import mirror_pod_uids, pod_owners, pods_of_mirror
from jobrelay.kinds.pod_ownership import OwnerHop, name_prefixes
from jobrelay.kinds.standing import State, completions, standing
from jobrelay.vocabulary.resource import Resource

BY_KIND = {kind.ref.kind: kind for kind in DEDICATED.values()}
JOB, JOBSET, RAYJOB, RAYCLUSTER, TRAINJOB, PYTORCHJOB, MPIJOB = (
    BY_KIND[name]
    for name in ("Job", "JobSet", "RayJob", "RayCluster", "TrainJob", "PyTorchJob", "MPIJob")
)
GENERIC = GenericKind(Resource("example.com", "v1", "sims", "Sim"), DEFAULT_FINISHED_CONDITIONS)


def mirror(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "uid": "m-uid"},
            "status": status or {}}  # fmt: skip


def pod(owner: str | None = None, **labels: str) -> dict[str, Any]:
    refs = [{"name": "x", "uid": owner, "controller": True}] if owner else []
    return {"metadata": {"name": "p", "uid": f"pod-{owner}", "labels": labels,
                         "ownerReferences": refs}}  # fmt: skip


def made(uid: str, controller: str) -> dict[str, Any]:
    return {"metadata": {"name": "x", "uid": uid,
                         "ownerReferences": [{"name": "train", "uid": controller,
                                              "controller": True}]}}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "status", "selectors", "hops"),
    [
        (JOB, None, ("batch.kubernetes.io/controller-uid=m-uid",), ()),
        (JOBSET, None, ("jobset.sigs.k8s.io/jobset-uid=m-uid",), ()),
        (TRAINJOB, None, ("jobset.sigs.k8s.io/jobset-name=train",),
         (OwnerHop(JOBSET.ref, "train"),)),
        (RAYCLUSTER, None, ("ray.io/cluster=train",), ()),
        (RAYJOB, {"rayClusterName": "train-x8k2p"},
         ("ray.io/cluster=train-x8k2p", "batch.kubernetes.io/job-name=train"),
         (OwnerHop(RAYCLUSTER.ref, "train-x8k2p"), OwnerHop(JOB.ref, "train"))),
        # Before KubeRay named its cluster: the submitter's only.
        (RAYJOB, None, ("batch.kubernetes.io/job-name=train",), (OwnerHop(JOB.ref, "train"),)),
        (PYTORCHJOB, None, ("training.kubeflow.org/job-name=train",), ()),
        (MPIJOB, None, ("training.kubeflow.org/job-name=train",),
         (OwnerHop(JOB.ref, "train-launcher"),)),
        (GENERIC, None, ("",), ()),
    ],
)  # fmt: skip
def test_where_each_kinds_pods_are_listed_and_what_makes_them(
    kind: WorkloadKind,
    status: dict[str, Any] | None,
    selectors: tuple[str, ...],
    hops: tuple[OwnerHop, ...],
) -> None:
    assert kind.pod_selectors(mirror(status)) == selectors
    assert kind.owner_hops(mirror(status)) == hops


@pytest.mark.parametrize(
    ("kind", "candidate", "owned"),
    [
        (JOB, pod("m-uid"), True),
        # Its labels alone do not make a pod a Job's (a tenant there may write them).
        (JOB, pod("other", **{"batch.kubernetes.io/controller-uid": "m-uid"}), False),
        (JOB, pod(None, **{"batch.kubernetes.io/controller-uid": "m-uid"}), False),
        # A JobSet's pods are its child Jobs': its UID label speaks for it.
        (JOBSET, pod("child-job", **{"jobset.sigs.k8s.io/jobset-uid": "m-uid"}), True),
        (JOBSET, pod("child-job", **{"jobset.sigs.k8s.io/jobset-uid": "other"}), False),
        (RAYCLUSTER, pod("m-uid", **{"ray.io/cluster": "train"}), True),
        (RAYCLUSTER, pod("namesake", **{"ray.io/cluster": "train"}), False),
        (PYTORCHJOB, pod("m-uid"), True),
        (PYTORCHJOB, pod("namesake", **{"training.kubeflow.org/job-name": "train"}), False),
        (GENERIC, pod("m-uid"), True),
        (GENERIC, pod(None), False),
    ],
)  # fmt: skip
def test_a_pod_is_a_mirrors_by_uid(kind: WorkloadKind, candidate: Any, owned: bool) -> None:
    assert kind.owns(candidate, {"m-uid"}) is owned


def test_a_hop_counts_only_while_the_mirror_controls_it() -> None:
    status = {"rayClusterName": "train-x8k2p"}
    cluster, submitter = RAYJOB.owner_hops(mirror(status))
    found = [(cluster, made("rc-uid", "m-uid")), (submitter, made("job-uid", "someone-else"))]
    uids = mirror_pod_uids(RAYJOB, mirror(status), found)
    assert uids == {"m-uid", "rc-uid"}
    # Nothing found there, or an object the kind does not make: the mirror's own alone.
    assert mirror_pod_uids(RAYJOB, mirror(status), [(cluster, None)]) == {"m-uid"}
    stray = OwnerHop(JOBSET.ref, "train")
    assert mirror_pod_uids(RAYJOB, mirror(status), [(stray, made("x", "m-uid"))]) == {"m-uid"}
    pods = [pod("rc-uid", **{"ray.io/cluster": "train-x8k2p"}), pod("job-uid"), pod("rc-uid")]
    assert [p["metadata"]["uid"] for p in pods_of_mirror(RAYJOB, uids, pods)] == ["pod-rc-uid"]


def test_a_trainjobs_pods_are_its_jobsets() -> None:
    (jobset,) = TRAINJOB.owner_hops(mirror())
    uids = mirror_pod_uids(TRAINJOB, mirror(), [(jobset, made("js-uid", "m-uid"))])
    mine = pod("child-job", **{"jobset.sigs.k8s.io/jobset-uid": "js-uid"})
    theirs = pod("child-job", **{"jobset.sigs.k8s.io/jobset-uid": "other-js"})
    assert TRAINJOB.owns(mine, uids) and not TRAINJOB.owns(theirs, uids)


def test_an_mpijobs_launcher_pod_is_its_launcher_jobs() -> None:
    (launcher,) = MPIJOB.owner_hops(mirror())
    uids = mirror_pod_uids(MPIJOB, mirror(), [(launcher, made("launcher-uid", "m-uid"))])
    assert MPIJOB.owns(pod("launcher-uid"), uids) and MPIJOB.owns(pod("m-uid"), uids)


@given(
    owner=st.sampled_from(["m-uid", "other", ""]),
    labels=st.dictionaries(
        st.sampled_from(sorted({label for k in DEDICATED.values() for label in k.pod_labels})),
        st.sampled_from(["m-uid", "train", "other"]),
    ),
)
def test_no_pod_is_a_mirrors_by_its_labels_names_alone(owner: str, labels: dict[str, str]) -> None:
    """Whatever labels a pod carries, it is a mirror's only if its controller, or a UID
    label of its kind, names the mirror's UID."""
    candidate = pod(owner or None, **labels)
    for kind in (*DEDICATED.values(), GENERIC):
        uid_named = owner == "m-uid" or any(
            labels.get(key) == "m-uid" for key in kind.pod_uid_labels
        )
        assert kind.owns(candidate, {"m-uid"}) is uid_named


@pytest.mark.parametrize(
    ("candidate", "owners"),
    [
        (pod("m-uid"), {("x", "m-uid")}),
        (pod(None, **{"batch.kubernetes.io/job-name": "j", "controller-uid": "u"}), {("j", "u")}),
        (pod(None, **{"jobset.sigs.k8s.io/jobset-name": "s", "jobset.sigs.k8s.io/jobset-uid":
                      "su"}), {("s", "su")}),
        (pod(None, **{"ray.io/cluster": "train"}), set()),  # a name alone names nobody
        (pod(None, **{"training.kubeflow.org/job-name": "train"}), set()),
    ],
)  # fmt: skip
def test_whom_a_pod_speaks_for(candidate: Any, owners: set[tuple[str, str]]) -> None:
    assert pod_owners(candidate) == owners


@pytest.mark.parametrize(
    ("kind", "made", "name", "mirrors"),
    [
        (JOBSET, ("batch", "Job"), "sweep-workers-0", ("sweep-workers", "sweep")),
        (JOBSET, ("ray.io", "RayCluster"), "sweep-x", ()),
        (TRAINJOB, ("jobset.x-k8s.io", "JobSet"), "tj", ("tj",)),
        (TRAINJOB, ("batch", "Job"), "tj-node-0", ("tj-node", "tj")),
        (RAYJOB, ("ray.io", "RayCluster"), "ray-x8k2p", ("ray",)),
        (RAYJOB, ("batch", "Job"), "ray", ("ray",)),
        (MPIJOB, ("batch", "Job"), "mpi-launcher", ("mpi",)),
        (MPIJOB, ("batch", "Job"), "-launcher", ()),
        (JOB, ("batch", "Job"), "train-extra", ()),
        (PYTORCHJOB, ("batch", "Job"), "train-x", ()),
        (GENERIC, ("batch", "Job"), "train-x", ()),
    ],
)
def test_what_each_kinds_operator_makes_from_a_mirror(
    kind: WorkloadKind, made: tuple[str, str], name: str, mirrors: tuple[str, ...]
) -> None:
    assert kind.made_for(made, name) == mirrors


def test_name_prefixes() -> None:
    assert name_prefixes("a-b-c") == ("a-b", "a")
    assert name_prefixes("abc") == () and name_prefixes("-a") == ()


@pytest.mark.parametrize(
    ("kind", "status", "at_work"),
    [
        (JOB, {}, False),
        (JOB, {"active": 0, "failed": 2}, False),
        (JOB, {"active": 1}, True),
        (JOB, {"ready": 1}, True),
        (JOB, {"succeeded": 1}, True),
        (JOB, {"active": "1"}, False),
        (JOBSET, {"replicatedJobsStatus": [{"name": "w", "active": 0}, {"name": "d", "ready": 2}]},
         True),
        (JOBSET, {"replicatedJobsStatus": [{"name": "w", "active": 0}]}, False),
        (TRAINJOB, {"jobsStatus": [{"name": "node", "active": 1}]}, True),
        (TRAINJOB, {"jobsStatus": [{"name": "node", "failed": 1}]}, False),
        (RAYJOB, {"jobDeploymentStatus": "Running"}, True),
        (RAYJOB, {"jobDeploymentStatus": "Initializing"}, False),
        (RAYJOB, {"jobDeploymentStatus": "Initializing",
                  "rayClusterStatus": {"readyWorkerReplicas": 2}}, True),
        (RAYCLUSTER, {"state": "ready"}, True),
        (RAYCLUSTER, {"readyWorkerReplicas": 1}, True),
        (RAYCLUSTER, {}, False),
        (PYTORCHJOB, {"replicaStatuses": {"Master": {"active": 1}}}, True),
        (MPIJOB, {"replicaStatuses": {"Launcher": {"failed": 1}, "Worker": {}}}, False),
        (GENERIC, {"active": 1}, True),
        (GENERIC, {"conditions": []}, False),
    ],
)  # fmt: skip
def test_pods_at_work(kind: WorkloadKind, status: dict[str, Any], at_work: bool) -> None:
    assert kind.pods_at_work({"status": status}) is at_work


def test_standing_asks_the_adapter_whether_pods_work() -> None:
    placed = {"metadata": {"annotations": {"jobrelay.dev/cluster": "w"}}}
    running = {**placed, "status": {"replicaStatuses": {"Master": {"active": 1}}}}
    assert standing(PYTORCHJOB, running).state is State.RUNNING
    assert standing(PYTORCHJOB, placed).state is State.DISPATCHED
    # The field alone, on a kind whose status has no such thing: nothing said.
    assert standing(RAYCLUSTER, {**placed, "status": {"active": 3}}).state is State.DISPATCHED


@pytest.mark.parametrize(
    ("kind", "obj", "shown"),
    [
        (JOB, {"spec": {"completions": 3}, "status": {"succeeded": 1}}, "1/3"),
        (JOBSET, {"spec": {"replicatedJobs": [{"replicas": 2}]},
                  "status": {"replicatedJobsStatus": [{"succeeded": 1}]}}, "1/2"),
        (RAYJOB, {"status": {"succeeded": 1}}, "-"),
        (GENERIC, {"status": {"succeeded": 1}}, "-"),
    ],
)  # fmt: skip
def test_completions_are_the_adapters(kind: WorkloadKind, obj: dict[str, Any], shown: str) -> None:
    assert kind.completions(obj) == shown
    assert completions(obj, kind) == shown
    assert completions({"kind": kind.ref.kind, **obj}) == shown


def test_pod_index_as_each_kind_numbers_its_pods() -> None:
    assert JOB.pod_index(pod(**{"batch.kubernetes.io/job-completion-index": "2"})) == "2"
    assert PYTORCHJOB.pod_index(pod(**{"training.kubeflow.org/replica-index": "1"})) == "1"
    assert RAYCLUSTER.pod_index(pod(**{"ray.io/cluster": "x"})) is None


def test_every_dedicated_kind_says_which_labels_its_pods_have() -> None:
    for kind in kinds_from_names(DEDICATED):
        assert kind.pod_labels, kind


@pytest.mark.parametrize("kind", [*DEDICATED.values(), GENERIC], ids=lambda k: k.ref.kind)
def test_an_object_an_operator_made_from_a_mirror_is_no_mirror(kind: WorkloadKind) -> None:
    """KubeRay copies a RayJob's labels (ours among them) onto the RayCluster it makes:
    an object another controls is not cached as a mirror (nor deleted as an orphan)."""
    ours = {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {}, "status": {}}
    assert kind.cached_mirror(ours) is not None
    made_from = {**ours, "metadata": {**ours["metadata"], "ownerReferences": [
        {"name": "t", "uid": "rayjob-uid", "controller": True}]}}  # fmt: skip
    assert kind.cached_mirror(made_from) is None


@pytest.mark.parametrize("kind", list(DEDICATED.values()), ids=lambda kind: kind.ref.kind)
def test_each_hop_a_kind_names_is_of_a_resource_it_declares(kind: WorkloadKind) -> None:
    """A worker's hop feed watches ``owner_hop_refs``: a hop of another resource would be
    read for logs but never tie its pods to the mirror in the capacity tracker."""
    hops = kind.owner_hops(mirror({"rayClusterName": "train-x8k2p"}))
    assert {hop.ref for hop in hops} == set(kind.owner_hop_refs)
