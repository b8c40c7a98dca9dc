from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.kinds.job.pod_labels import JOB_NAME_LABEL, JOB_UID_LABEL
from jobrelay.kinds.jobset import JOBSET_NAME_LABEL, JOBSET_UID_LABEL
from jobrelay.kinds.mirror_pods import pod_owners
from jobrelay.placement import tracker as tracker_module
from jobrelay.placement.slim_objects import effective_requests, slim_node, slim_pod
from jobrelay.placement.tracker import CapacityTracker, OwnedPods

GI = 2**30


def node_obj(name: str, cpu: str = "8", memory: str = "32Gi", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {"zone": "a"},
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {"unschedulable": extra.get("unschedulable", False)},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": extra.get("ready", "True")},
            ],
            "images": [{"names": ["busybox"], "sizeBytes": 1}],
        },
    }


def pod_obj(
    name: str,
    node: str = "",
    cpu: str = "1",
    memory: str = "1Gi",
    *,
    phase: str = "Pending",
    job: str | None = "j",
    namespace: str = "ns",
    unschedulable_since: str | None = None,
) -> dict[str, Any]:
    conditions = []
    if unschedulable_since:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": unschedulable_since,
            }
        )
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": "1",
            "labels": {JOB_NAME_LABEL: job, "controller-uid": f"uid-{job}"} if job else {},
        },
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions},
    }


def feed_pod(tracker: CapacityTracker, obj: dict[str, Any]) -> bool:
    metadata = obj["metadata"]
    return tracker.set_pod(f"{metadata['namespace']}/{metadata['name']}", slim_pod(obj))


def requested(tracker: CapacityTracker) -> dict[str, dict[str, int]]:
    return {n.name: dict(n.requested) for n in tracker.capacity().nodes}


# -- tables -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [{"resources": {"requests": {"cpu": "500m"}}}]}, {"cpu": 500}),
        (  # limits alone default the requests
            {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            {"nvidia.com/gpu": 2},
        ),
        (  # the largest init container wins over a smaller sum of app containers
            {
                "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
                "containers": [
                    {"resources": {"requests": {"cpu": "1"}}},
                    {"resources": {"requests": {"cpu": "1"}}},
                ],
            },
            {"cpu": 3000},
        ),
        (  # a sidecar (restartable init container) adds to the app containers
            {
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
                ],
                "containers": [{"resources": {"requests": {"cpu": "2"}}}],
            },
            {"cpu": 3000},
        ),
        (  # overhead adds
            {
                "containers": [{"resources": {"requests": {"memory": "1Gi"}}}],
                "overhead": {"memory": "128Mi"},
            },
            {"memory": GI + 128 * 2**20},
        ),
        (  # pod-level resources replace the containers' sum where set
            {
                "resources": {"requests": {"cpu": "4"}},
                "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            },
            {"cpu": 4000, "memory": GI},
        ),
        ({"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}, {}),  # malformed
        ({"containers": [{"name": "no-requests"}]}, {}),
    ],
)
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert dict(effective_requests(spec)) == {**expected, "pods": 1}


def test_equal_requests_are_shared() -> None:
    assert slim_pod(pod_obj("a"))["requests"] is slim_pod(pod_obj("b"))["requests"]  # type: ignore[index]


def test_slim_objects_keep_only_what_placement_reads() -> None:
    node = slim_node(node_obj("n1"))
    assert node == {
        "metadata": {"name": "n1", "resourceVersion": "1", "labels": {"zone": "a"}},
        "spec": {"taints": [], "unschedulable": False},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    pod = slim_pod(pod_obj("p", "n1", unschedulable_since="2026-01-01T00:00:00Z"))
    assert pod == {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "",
            "resourceVersion": "1",
            "labels": {JOB_NAME_LABEL: "j", "controller-uid": "uid-j"},
        },
        "nodeName": "n1",
        "phase": "Pending",
        "requests": (("cpu", 1000), ("memory", GI), ("pods", 1)),
        "unschedulableSince": "2026-01-01T00:00:00Z",
        "owners": (("j", "uid-j"),),  # found once, read on every event of the pod
    }
    assert slim_pod(pod_obj("done", "n1", phase="Succeeded")) is None
    assert slim_pod(pod_obj("failed", "n1", phase="Failed")) is None


def test_pods_on_a_node_add_up_and_deletes_undo_them() -> None:
    tracker = CapacityTracker()
    tracker.set_node(slim_node(node_obj("n1")))
    tracker.set_node(slim_node(node_obj("n2")))
    feed_pod(tracker, pod_obj("a", "n1", "1", "1Gi"))
    feed_pod(tracker, pod_obj("b", "n1", "500m", "2Gi"))
    feed_pod(tracker, pod_obj("c", "", "4", "4Gi"))  # pending: on no node
    assert requested(tracker) == {
        "n1": {"cpu": 1500, "memory": 3 * GI, "pods": 2},
        "n2": {},
    }
    # Deleted with a final state that says something else: what was counted is undone.
    assert tracker.delete_pod("ns/a")
    assert requested(tracker)["n1"] == {"cpu": 500, "memory": 2 * GI, "pods": 1}
    # Finishing (the informer's transform returns None) frees the node too.
    assert tracker.set_pod("ns/b", slim_pod(pod_obj("b", "n1", phase="Succeeded")))
    assert requested(tracker)["n1"] == {}
    assert not tracker.delete_pod("ns/never-seen")


def test_pods_bound_before_their_node_is_known_count_once_it_is() -> None:
    tracker = CapacityTracker()
    feed_pod(tracker, pod_obj("a", "n1", "2"))
    assert tracker.capacity().nodes == ()
    tracker.set_node(slim_node(node_obj("n1")))
    assert requested(tracker) == {"n1": {"cpu": 2000, "memory": GI, "pods": 1}}
    tracker.delete_node("n1")
    assert tracker.capacity().nodes == ()
    assert tracker.requested() == {"n1": {"cpu": 2000, "memory": GI, "pods": 1}}


def test_capacity_is_the_same_object_until_something_changes() -> None:
    tracker = CapacityTracker()
    tracker.set_node(slim_node(node_obj("n1")))
    first = tracker.capacity()
    assert tracker.capacity() is first
    # The same node again, or a pending pod: nothing placement reads on a node changed.
    assert not tracker.set_node(slim_node(node_obj("n1")))
    feed_pod(tracker, pod_obj("pending"))
    assert tracker.capacity() is first
    feed_pod(tracker, pod_obj("bound", "n1"))
    second = tracker.capacity()
    assert second is not first
    assert first.nodes[0].requested == {}  # an earlier snapshot never changes
    # A node turning unready or cordoned is a change too.
    assert tracker.set_node(slim_node(node_obj("n1", ready="False")))
    assert not tracker.capacity().nodes[0].ready


def test_the_bindings_version_moves_only_as_pods_are_bound_or_go() -> None:
    tracker = CapacityTracker()
    feed_pod(tracker, pod_obj("p1"))
    assert tracker.bindings_version == 0  # created, not bound: no reservation reads it
    feed_pod(tracker, pod_obj("p1", "n1"))
    bound = tracker.bindings_version
    assert bound > 0
    feed_pod(tracker, pod_obj("p1", "n1", phase="Running"))
    assert tracker.bindings_version == bound
    tracker.delete_pod("ns/p1")
    assert tracker.bindings_version > bound


def test_which_owners_were_rebound_is_said_until_the_oldest_moves_are_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tracker_module, "REBOUND_KEPT", 4)
    tracker = CapacityTracker()
    feed_pod(tracker, pod_obj("p1", "n1"))  # j's
    start = tracker.bindings_version
    feed_pod(tracker, pod_obj("p2", "n1", job="k"))
    assert tracker.rebound_since(start) == {("ns", "k")}
    assert tracker.rebound_since(tracker.bindings_version) == set()
    for index in range(4):
        feed_pod(tracker, pod_obj(f"q{index}", "n1", job="k"))
    assert tracker.rebound_since(start) is None  # k's first move was let go
    assert CapacityTracker().rebound_since(start) is None  # another tracker's version
    assert tracker.rebound_since(tracker.bindings_version - 1) == {("ns", "k")}


def test_an_update_that_changes_nothing_counted_reports_no_change() -> None:
    tracker = CapacityTracker()
    assert feed_pod(tracker, pod_obj("a", "n1"))
    again = pod_obj("a", "n1")
    again["metadata"]["resourceVersion"] = "2"
    assert not feed_pod(tracker, again)


def test_malformed_node_counts_as_absent() -> None:
    tracker = CapacityTracker()
    tracker.set_node(slim_node(node_obj("n1")))
    assert tracker.set_node(slim_node(node_obj("n1", cpu="lots")))
    assert tracker.capacity().nodes == ()


def test_pods_of_an_owner() -> None:
    tracker = CapacityTracker()
    assert tracker.pods_of("ns", "j", "uid-j") == OwnedPods(0, 0, False, None)
    feed_pod(tracker, pod_obj("p1", unschedulable_since="2026-01-01T00:00:05Z"))
    feed_pod(tracker, pod_obj("p2", unschedulable_since="2026-01-01T00:00:01Z"))
    feed_pod(tracker, pod_obj("p3"))
    feed_pod(tracker, pod_obj("other", job="k"))
    feed_pod(tracker, pod_obj("p4", namespace="elsewhere"))
    assert tracker.pods_of("ns", "j", "uid-j") == OwnedPods(3, 0, False, "2026-01-01T00:00:01Z")
    # Bound: no longer unschedulable, and started.
    feed_pod(tracker, pod_obj("p2", "n1"))
    assert tracker.pods_of("ns", "j", "uid-j") == OwnedPods(3, 1, True, "2026-01-01T00:00:05Z")
    tracker.delete_pod("ns/p1")
    tracker.delete_pod("ns/p2")
    assert tracker.pods_of("ns", "j", "uid-j") == OwnedPods(1, 0, False, None)
    tracker.delete_pod("ns/p3")
    assert tracker.pods_of("ns", "j", "uid-j") == OwnedPods()
    assert tracker.pods_of("elsewhere", "j", "uid-j").total == 1


def test_a_jobset_pod_counts_for_its_jobset_and_its_job() -> None:
    tracker = CapacityTracker()
    obj = pod_obj("p", job="js-workers-0")
    obj["metadata"]["labels"][JOBSET_NAME_LABEL] = "js"
    obj["metadata"]["labels"][JOBSET_UID_LABEL] = "uid-js"
    obj["status"]["phase"] = "Running"
    feed_pod(tracker, obj)
    assert tracker.pods_of("ns", "js", "uid-js") == OwnedPods(1, 0, True, None)
    assert tracker.pods_of("ns", "js-workers-0", "uid-js-workers-0").total == 1
    before = tracker.bindings_version
    obj["spec"]["nodeName"] = "n1"
    feed_pod(tracker, obj)
    assert {("ns", "js"), ("ns", "js-workers-0")} <= (tracker.rebound_since(before) or set())


def test_a_pod_counts_only_for_the_owner_its_uid_names() -> None:
    tracker = CapacityTracker()
    feed_pod(tracker, pod_obj("mine", job="j"))
    namesake = pod_obj("namesake", job="j")
    namesake["metadata"]["labels"]["controller-uid"] = "someone-else"
    feed_pod(tracker, namesake)
    name_only = pod_obj("name-only", job="j")
    del name_only["metadata"]["labels"]["controller-uid"]
    feed_pod(tracker, name_only)
    assert tracker.pods_of("ns", "j", "uid-j").total == 1
    assert tracker.pods_of("ns", "j", "someone-else").total == 1
    assert tracker.pods_of("ns", "j", "").total == 0


@pytest.mark.parametrize(
    ("metadata", "owners"),
    [
        ({"labels": {JOB_NAME_LABEL: "j", JOB_UID_LABEL: "u"}}, {("j", "u")}),
        ({"labels": {"job-name": "j", "controller-uid": "u"}}, {("j", "u")}),
        ({"labels": {JOB_NAME_LABEL: "j"}}, set()),
        ({"labels": {JOB_UID_LABEL: "u"}}, set()),
        ({"labels": {JOBSET_NAME_LABEL: "s", JOBSET_UID_LABEL: "su"}}, {("s", "su")}),
        ({"ownerReferences": [{"name": "j", "uid": "u", "controller": True}]}, {("j", "u")}),
        ({"ownerReferences": [{"name": "j", "uid": "u"}]}, set()),  # not its controller
        ({"ownerReferences": [{"name": "j", "uid": "u", "controller": "true"}]}, set()),
        ({"ownerReferences": ["junk", {"name": "j", "controller": True}]}, set()),
        ({}, set()),
    ],
)
def test_pod_owners_are_names_with_uids(metadata: dict[str, Any], owners: set[Any]) -> None:
    assert pod_owners({"metadata": metadata}) == owners
    full = {"metadata": {"name": "p", "namespace": "ns", **metadata}, "spec": {}, "status": {}}
    slim = slim_pod(full)
    assert slim is not None and pod_owners(slim) == owners


def test_pods_without_owner_labels_still_count_on_their_node() -> None:
    tracker = CapacityTracker()
    tracker.set_node(slim_node(node_obj("n1")))
    feed_pod(tracker, pod_obj("bare", "n1", "3", job=None))
    assert requested(tracker)["n1"]["cpu"] == 3000


# -- property: incremental equals from scratch --------------------------------------------

_NODES = ["n1", "n2", "n3"]
_pod_states = st.fixed_dictionaries(
    {
        "node": st.sampled_from(["", *_NODES]),
        "cpu": st.sampled_from(["0", "100m", "1", "2500m"]),
        "memory": st.sampled_from(["0", "1Gi", "3Gi"]),
        "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
        "job": st.sampled_from([None, "j", "k"]),
        "since": st.sampled_from([None, "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z"]),
    }
)
_events = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.sampled_from(["a", "b", "c", "d"]), _pod_states),
        st.tuples(st.just("delete-pod"), st.sampled_from(["a", "b", "c", "d"]), st.none()),
        st.tuples(st.just("node"), st.sampled_from(_NODES), st.sampled_from(["4", "8"])),
        st.tuples(st.just("delete-node"), st.sampled_from(_NODES), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_events)
def test_incremental_sums_equal_a_recomputation(events: list[tuple[str, str, Any]]) -> None:
    tracker = CapacityTracker()
    pods: dict[str, dict[str, Any]] = {}  # the informer's cache: slim objects by key
    nodes: dict[str, str] = {}
    looks: list[tuple[int, dict[str, int]]] = []
    for what, name, state in events:
        bound_before = {o: tracker.pods_of("ns", o, f"uid-{o}").bound for o in ("j", "k")}
        version_before = tracker.bindings_version
        if what == "pod":
            obj = pod_obj(
                name, state["node"], state["cpu"], state["memory"], phase=state["phase"],
                job=state["job"], unschedulable_since=state["since"],
            )  # fmt: skip
            slim = slim_pod(obj)
            tracker.set_pod(f"ns/{name}", slim)
            if slim is None:
                pods.pop(name, None)
            else:
                pods[name] = slim
        elif what == "delete-pod":
            tracker.delete_pod(f"ns/{name}")
            pods.pop(name, None)
        elif what == "node":
            tracker.set_node(slim_node(node_obj(name, cpu=state)))
            nodes[name] = state
        else:
            tracker.delete_node(name)
            nodes.pop(name, None)
        tracker.capacity()  # builds in between must not go stale
        bound_after = {o: tracker.pods_of("ns", o, f"uid-{o}").bound for o in ("j", "k")}
        if bound_after != bound_before:  # what a reservation pass reads moved its version
            assert tracker.bindings_version != version_before
        looks.append((version_before, bound_before))
    # Since any earlier version, every owner whose bound pods changed is named.
    now = {o: tracker.pods_of("ns", o, f"uid-{o}").bound for o in ("j", "k")}
    for version, bound in looks:
        named = tracker.rebound_since(version)
        assert named is not None  # 40 events: none let go
        assert {("ns", o) for o in now if now[o] != bound[o]} <= named

    fresh = CapacityTracker()
    for name, cpu in nodes.items():
        fresh.set_node(slim_node(node_obj(name, cpu=cpu)))
    for name, slim in pods.items():
        fresh.set_pod(f"ns/{name}", slim)
    assert requested(tracker) == requested(fresh)
    assert sorted(n.name for n in tracker.capacity().nodes) == sorted(nodes)
    expected: dict[str, dict[str, int]] = {}
    for slim in pods.values():
        if slim["nodeName"]:
            sums = expected.setdefault(slim["nodeName"], {})
            for resource, quantity in slim["requests"]:
                sums[resource] = sums.get(resource, 0) + quantity
    assert {n: s for n, s in requested(tracker).items() if s} == {
        n: s for n, s in expected.items() if n in nodes
    }
    for owner in ("j", "k"):
        mine = [
            s
            for s in pods.values()
            if (s["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) == owner
        ]
        unschedulable = [
            s["unschedulableSince"] for s in mine if not s["nodeName"] and "unschedulableSince" in s
        ]
        assert tracker.pods_of("ns", owner, f"uid-{owner}") == OwnedPods(
            len(mine),
            sum(1 for s in mine if s["nodeName"]),
            any(s["nodeName"] or s["phase"] == "Running" for s in mine),
            min(unschedulable) if unschedulable else None,
        )


def test_a_pod_that_cannot_run_for_its_worker_s_fault_is_looked_at() -> None:
    tracker = CapacityTracker()
    pulling = pod_obj("p1", "n1")
    pulling["status"]["containerStatuses"] = [
        {"name": "c", "state": {"waiting": {"reason": "ErrImagePull", "message": "denied"}}}
    ]
    assert feed_pod(tracker, pod_obj("p1", "n1"))
    assert tracker.pods_of("ns", "j", "uid-j").worker_fault is None
    assert tracker.unschedulable() == []
    assert feed_pod(tracker, pulling), "a fault appearing is a change placement reads"
    owned = tracker.pods_of("ns", "j", "uid-j")
    assert owned.worker_fault == "ErrImagePull (container c): denied"
    assert owned.total == 1 and owned.bound == 1
    assert tracker.unschedulable() == [("ns", "j", "uid-j")]
    assert feed_pod(tracker, pod_obj("p1", "n1", phase="Running"))
    assert tracker.pods_of("ns", "j", "uid-j").worker_fault is None
    assert tracker.unschedulable() == []
    feed_pod(tracker, pulling)
    tracker.delete_pod("ns/p1")
    assert tracker.pods_of("ns", "j", "uid-j") == OwnedPods()
