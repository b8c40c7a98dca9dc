"""What the stand-in operators make of an object, as the real operators do: the pods (and
the objects that make pods) with their names, labels and controller references, which
the kinds' adapters find again as the workload's own."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from tests.ecosystem import BY_KIND, manifest

from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kinds.mirror_pods import mirror_pod_uids
from jobrelay.localfleet.standin.children_rules import POD, Children
from jobrelay.localfleet.standin.standin_rules import next_children

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
Obj = dict[str, Any]
ADAPTERS = {kind.ref.kind: kind for kind in DEDICATED.values()}


def created(kind: str, status: Obj | None = None, **kwargs: Any) -> Obj:
    obj = manifest(kind, "job", **kwargs)
    obj["metadata"].update(namespace="team-a", uid="u1", creationTimestamp="2026-01-01T12:00:00Z")
    obj["status"] = status or {}
    return obj


def made(kind: str, obj: Obj) -> Children:
    return next_children(BY_KIND[kind], obj, T0)


def names(children: Children) -> list[tuple[str, str]]:
    return [(child.resource.kind, child.name) for child in children.wanted]


def controlled_by(child_body: Obj, uid: str) -> bool:
    refs = child_body["metadata"].get("ownerReferences") or []
    return any(ref.get("controller") is True and ref.get("uid") == uid for ref in refs)


def test_a_rayclusters_pods_are_its_head_and_workers() -> None:
    children = made("RayCluster", created("RayCluster"))
    assert names(children) == [
        ("Pod", "job-head"), ("Pod", "job-workers-worker-0"), ("Pod", "job-workers-worker-1")
    ]  # fmt: skip
    adapter = ADAPTERS["RayCluster"]
    mirror = created("RayCluster")
    (selector,) = adapter.pod_selectors(mirror)
    key, _, value = selector.partition("=")
    for pod in children.wanted:
        assert pod.resource == POD and controlled_by(pod.body, "u1")
        assert pod.body["metadata"]["labels"][key] == value
        assert adapter.owns(pod.body, mirror_pod_uids(adapter, mirror))
        # Ray nodes run until their cluster goes.
        assert pod.body["metadata"]["annotations"]["fleet.jobrelay.dev/outcome"] == "run-forever"
    head = children.wanted[0].body["metadata"]["labels"]
    assert head["ray.io/node-type"] == "head" and head["ray.io/group"] == "headgroup"


def test_a_suspended_rayclusters_pods_go() -> None:
    children = made("RayCluster", created("RayCluster", suspend=True))
    assert children.wanted == () and ("Pod", "job-head") in [
        (r.kind, n) for r, n in children.unwanted
    ]


def test_a_rayjob_makes_its_cluster_then_its_submitter() -> None:
    adapter = ADAPTERS["RayJob"]
    assert made("RayJob", created("RayJob")).wanted == ()  # not initialized yet
    initializing = created(
        "RayJob", {"jobDeploymentStatus": "Initializing", "rayClusterName": "job-standin"}
    )
    (cluster,) = made("RayJob", initializing).wanted
    assert (cluster.resource.kind, cluster.name) == ("RayCluster", "job-standin")
    assert controlled_by(cluster.body, "u1")
    # KubeRay copies the RayJob's labels onto its RayCluster, and says whose it is.
    labels = cluster.body["metadata"]["labels"]
    assert labels["ray.io/originated-from-cr-name"] == "job"
    assert cluster.body["spec"] == initializing["spec"]["rayClusterSpec"]
    running = created("RayJob", {"jobDeploymentStatus": "Running", "rayClusterName": "job-standin"})
    children = made("RayJob", running)
    assert names(children) == [("RayCluster", "job-standin"), ("Job", "job")]
    submitter = children.wanted[1]
    assert controlled_by(submitter.body, "u1")
    hops = adapter.owner_hops(running)
    assert [(hop.ref.kind, hop.name) for hop in hops] == [(c.resource.kind, c.name)
                                                         for c in children.wanted]  # fmt: skip
    template = submitter.body["spec"]["template"]
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["metadata"]["annotations"]["fleet.jobrelay.dev/duration"] == "3000ms"
    suspended = made("RayJob", {**running, "status": {"jobDeploymentStatus": "Suspending"}})
    assert suspended.wanted == () and len(suspended.unwanted) == 2


def test_a_failing_runs_pods_fail() -> None:
    running = created(
        "RayJob", {"jobDeploymentStatus": "Running", "rayClusterName": "job-standin"},
        outcome="Failed", run_seconds=20,
    )  # fmt: skip
    submitter = made("RayJob", running).wanted[1]
    annotations = submitter.body["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "fleet.jobrelay.dev/duration": "20000ms", "fleet.jobrelay.dev/outcome": "fail"
    }  # fmt: skip


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])
def test_a_kubeflow_jobs_pods_are_its_own(kind: str) -> None:
    adapter = ADAPTERS[kind]
    obj = created(kind, {"conditions": [{"type": "Created", "status": "True"}]})
    children = made(kind, obj)
    (selector,) = adapter.pod_selectors(obj)
    key, _, value = selector.partition("=")
    hops = {(hop.ref.kind, hop.name): hop for hop in adapter.owner_hops(obj)}
    found = [
        (hops[(c.resource.kind, c.name)], {**c.body, "metadata": {**c.body["metadata"],
                                                               "uid": f"{c.name}-uid"}})
        for c in children.wanted if (c.resource.kind, c.name) in hops
    ]  # fmt: skip
    uids = mirror_pod_uids(adapter, obj, found)
    pods = [c for c in children.wanted if c.resource == POD]
    assert pods and all(p.body["metadata"]["labels"][key] == value for p in pods)
    assert all(adapter.owns(p.body, uids) for p in pods)
    if kind == "PyTorchJob":
        assert names(children) == [("Pod", "job-master-0"), ("Pod", "job-worker-0")]
        assert children.wanted[0].body["metadata"]["labels"]["training.kubeflow.org/job-role"] == (
            "master"
        )
    else:
        assert names(children) == [("Pod", "job-worker-0"), ("Job", "job-launcher")]
        launcher = children.wanted[1].body["spec"]["template"]
        assert launcher["metadata"]["labels"][key] == value
        assert uids == {"u1", "job-launcher-uid"}


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])
def test_a_finished_or_suspended_kubeflow_job(kind: str) -> None:
    done = created(kind, {"conditions": [{"type": "Succeeded", "status": "True"}]})
    assert made(kind, done) == Children()
    suspended = made(kind, created(kind, suspend=True))
    assert suspended.wanted == () and suspended.unwanted


def test_a_trainjob_makes_a_jobset_named_as_itself() -> None:
    (jobset,) = made("TrainJob", created("TrainJob")).wanted
    assert (jobset.resource.kind, jobset.name) == ("JobSet", "job")
    assert controlled_by(jobset.body, "u1")
    (hop,) = ADAPTERS["TrainJob"].owner_hops(created("TrainJob"))
    assert (hop.ref, hop.name) == (jobset.resource, jobset.name)
    done = created("TrainJob", {"conditions": [{"type": "Complete", "status": "True"}]})
    assert made("TrainJob", done) == Children()


def test_another_controllers_object_makes_nothing() -> None:
    obj = created("RayCluster", managed_by="kueue.x-k8s.io/multikueue")
    assert made("RayCluster", obj) == Children()
