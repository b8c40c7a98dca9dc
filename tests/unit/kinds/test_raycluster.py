"""The RayCluster adapter (ray.io/v1): a service that never finishes."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.base import PodSet
from jobrelay.kinds.pods import pod_requests
from jobrelay.kinds.ray import RayClusterKind
from jobrelay.vocabulary.json_types import JsonObj

RAYCLUSTER = RayClusterKind()
NOW = "2026-01-01T00:00:10Z"


def pod(cpu: str) -> JsonObj:
    return {"spec": {"containers": [{"name": "ray", "image": "ray",
                                     "resources": {"requests": {"cpu": cpu}}}]}}  # fmt: skip


def raycluster(status: JsonObj | None = None, **spec: object) -> JsonObj:
    obj: JsonObj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "serve", "namespace": "team-a", "uid": "u-2"},
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "headGroupSpec": {"rayStartParams": {}, "template": pod("2")},
            "workerGroupSpecs": [
                {"groupName": "cpu", "replicas": 2, "numOfHosts": 2, "rayStartParams": {},
                 "template": pod("1")},
                {"groupName": "min", "minReplicas": 1, "rayStartParams": {}, "template": pod("1")},
                {"groupName": "off", "replicas": 5, "suspend": True, "rayStartParams": {},
                 "template": pod("1")},
            ],
            **spec,
        },
    }  # fmt: skip
    if status is not None:
        obj["status"] = status
    return obj


def mirror_with(status: JsonObj) -> JsonObj:
    return {
        **RAYCLUSTER.build_mirror(raycluster(), controller_name="c", origin="o"),
        "status": status,
    }


READY = {
    "state": "ready",
    "readyWorkerReplicas": 5,
    "availableWorkerReplicas": 5,
    "desiredWorkerReplicas": 5,
    "head": {"podIP": "10.0.0.1", "serviceName": "serve-head-svc"},
    "conditions": [
        {"type": "RayClusterProvisioned", "status": "True", "reason": "AllPodRunningAndReadyFirstTime",
         "message": "", "lastTransitionTime": "2026-01-01T00:00:03Z"},
        {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
         "message": "", "lastTransitionTime": "2026-01-01T00:00:02Z"},
    ],
    "observedGeneration": 4,
}  # fmt: skip


def test_the_mirror_drops_managed_by_only() -> None:
    obj = raycluster()
    mirror = RAYCLUSTER.build_mirror(obj, controller_name="c", origin="o")
    assert "managedBy" not in mirror["spec"]
    assert {k: v for k, v in obj["spec"].items() if k != "managedBy"} == mirror["spec"]


def test_it_never_finishes_and_its_status_is_copied() -> None:
    assert RAYCLUSTER.finish(raycluster(READY)) is None
    assert RAYCLUSTER.failed_status(raycluster(), "R", "m", now=NOW) is None
    copied = RAYCLUSTER.next_status(raycluster({}), mirror_with(READY), now=NOW)
    assert copied == READY
    assert RAYCLUSTER.shows_running(raycluster(READY)) and RAYCLUSTER.has_run(raycluster(READY))
    assert not RAYCLUSTER.shows_running(raycluster(READY, suspend=True))


def test_provisioned_never_goes_back_and_nothing_is_ready_without_a_mirror() -> None:
    current = {k: v for k, v in READY.items() if k != "observedGeneration"}
    stale = {"state": "", "conditions": [
        {"type": "RayClusterProvisioned", "status": "False", "reason": "RayClusterPodsProvisioning",
         "message": "", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}  # fmt: skip
    merged = RAYCLUSTER.next_status(raycluster(current), mirror_with(stale), now=NOW)
    assert merged is not None
    assert {c["type"]: c["status"] for c in merged["conditions"]} == {
        "RayClusterProvisioned": "True"
    }
    idle = RAYCLUSTER.next_status(raycluster(current), None, now=NOW)
    assert idle is not None
    assert (idle["readyWorkerReplicas"], idle["availableWorkerReplicas"]) == (0, 0)
    assert [c["type"] for c in idle["conditions"]] == ["RayClusterProvisioned"]


def test_suspend_and_pod_sets() -> None:
    mirror = mirror_with({})
    assert RAYCLUSTER.spec_patch(raycluster(suspend=True), mirror) == {"spec": {"suspend": True}}
    assert RAYCLUSTER.spec_patch(raycluster(), mirror) is None
    one = pod_requests(pod("1")["spec"])
    assert RAYCLUSTER.pod_sets(raycluster()) == [
        PodSet("head", 1, pod_requests(pod("2")["spec"])),
        PodSet("cpu", 4, one),  # replicas 2 x numOfHosts 2
        PodSet("min", 1, one),  # no replicas: minReplicas
        PodSet("off", 0, one),  # a suspended group runs none
    ]
    assert len(RAYCLUSTER.pod_templates(raycluster())) == 4


conditions = st.lists(
    st.fixed_dictionaries({
        "type": st.sampled_from(["RayClusterProvisioned", "HeadPodReady", "ReplicaFailure"]),
        "status": st.sampled_from(["True", "False"]),
        "reason": st.just("R"), "message": st.just(""),
        "lastTransitionTime": st.just("2026-01-01T00:00:00Z"),
    }), max_size=3, unique_by=lambda c: c["type"],
)  # fmt: skip
statuses = st.fixed_dictionaries(
    {}, optional={"state": st.sampled_from(["", "ready", "suspended"]),
                  "readyWorkerReplicas": st.integers(0, 4), "conditions": conditions},
)  # fmt: skip


@given(st.lists(statuses, min_size=1, max_size=8))
def test_provisioned_once_true_stays_true(seen: list[JsonObj]) -> None:
    obj = raycluster({})
    provisioned = False
    for theirs in seen:
        status = RAYCLUSTER.next_status(obj, mirror_with(copy.deepcopy(theirs)), now=NOW)
        if status is not None:
            obj["status"] = status
        now_true = any(
            c["type"] == "RayClusterProvisioned" and c["status"] == "True"
            for c in (obj.get("status") or {}).get("conditions") or []
        )
        assert now_true or not provisioned
        provisioned = now_true
