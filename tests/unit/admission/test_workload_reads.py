"""What fleet-wide queues read from the manager's caches: namespaces' labels (bounded),
priorities from PriorityClasses, quotas' hard values, the fleet's allocatable."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.admission.workload_reads import (
    MAX_NAMESPACE_LABELS,
    Priorities,
    entry_key,
    fit_likeness,
    fleet_of,
    limits_of,
    priority_of,
    slim_namespace,
    slim_priority_class,
    slim_resource_quota,
)
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.capacity import Node, WorkerCapacity


def template(priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"spec": spec}


def pc(name: str, value: Any, *, default: bool = False) -> dict[str, Any]:
    return slim_priority_class(
        {"metadata": {"name": name, "resourceVersion": "1"}, "value": value,
         "globalDefault": default, "description": "x"}
    )  # fmt: skip


CLASSES = Priorities.of([pc("high", 1000), pc("low", -5), pc("bad", "9"), pc("bool", True)])


@pytest.mark.parametrize(
    ("templates", "priorities", "expected"),
    [
        ([template("high")], CLASSES, 1000),
        ([template("low")], CLASSES, -5),
        ([template()], CLASSES, 0),  # no class, no global default
        ([template("unknown")], CLASSES, 0),
        ([template("bad")], CLASSES, 0),  # a value that is not an integer is no class
        ([template("low"), template("high")], CLASSES, 1000),  # the highest of its pods
        ([], CLASSES, 0),
        ([template()], Priorities.of([pc("d", 50, default=True)]), 50),  # globalDefault
        ([template("high")], Priorities.of([pc("high", 7), pc("d", 50, default=True)]), 7),
        ([{"spec": None}, "nonsense"], CLASSES, 0),
    ],
)
def test_a_workloads_priority(templates: list[Any], priorities: Priorities, expected: int) -> None:
    assert priority_of(templates, priorities) == expected


def test_several_global_defaults_the_highest_counts() -> None:
    assert Priorities.of([pc("a", 5, default=True), pc("b", 9, default=True)]).default == 9


def test_the_namespace_cache_keeps_labels_bounded() -> None:
    labels = {f"k{i}": "v" for i in range(MAX_NAMESPACE_LABELS + 10)}
    labels["long"] = "x" * 400
    slim = slim_namespace({"metadata": {"name": "n", "labels": labels, "uid": "u"}})
    kept = slim["metadata"]["labels"]
    assert len(kept) == MAX_NAMESPACE_LABELS and "long" not in kept
    assert set(slim["metadata"]) == {"name", "resourceVersion", "uid", "annotations", "labels"}


@given(st.dictionaries(st.text(max_size=80), st.text(max_size=80), max_size=200))
def test_any_labels_slim_to_a_bounded_map(labels: dict[str, str]) -> None:
    kept = slim_namespace({"metadata": {"labels": labels}})["metadata"]["labels"]
    assert len(kept) <= MAX_NAMESPACE_LABELS
    assert all(labels[k] == v for k, v in kept.items())


def test_a_quota_is_cached_with_its_hard_values_only() -> None:
    quota = {
        "metadata": {"name": "q", "namespace": "a", "resourceVersion": "3", "uid": "u"},
        "spec": {"hard": {"requests.cpu": "2"}, "scopes": ["BestEffort"]},
        "status": {"used": {"requests.cpu": "1"}},
    }
    assert slim_resource_quota(quota) == {
        "metadata": {"name": "q", "namespace": "a", "resourceVersion": "3"},
        "spec": {"hard": {"requests.cpu": "2"}},
    }
    assert slim_resource_quota({"spec": {"hard": "nonsense"}})["spec"] == {"hard": {}}


def node(name: str, cpu: int, *, unschedulable: bool = False, ready: bool = True) -> Node:
    return Node(name=name, allocatable={"cpu": cpu, "memory": 1 << 30},
                unschedulable=unschedulable, ready=ready)  # fmt: skip


def test_the_fleet_is_the_schedulable_nodes_allocatable_summed() -> None:
    one = WorkerCapacity((node("a", 8000), node("b", 8000, unschedulable=True)))
    two = WorkerCapacity((node("c", 4000), node("d", 4000, ready=False)))
    assert fleet_of([one, two]).allocatable == {"cpu": 12000, "memory": 2 << 30}
    assert fleet_of([]).allocatable == {}


def limited(*containers: dict[str, str], init: dict[str, str] | None = None,
            parallelism: int = 1) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "resources": {"limits": c}} for i, c in enumerate(containers)
        ]
    }
    if init is not None:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": init}}]
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "a"},
        "spec": {"parallelism": parallelism, "completions": parallelism,
                 "template": {"spec": spec}},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (limited({"cpu": "1"}), {"cpu": 1000}),
        (limited({"cpu": "1"}, {"cpu": "500m", "memory": "1Gi"}), {"cpu": 1500, "memory": 1 << 30}),
        (limited({"cpu": "1"}, init={"cpu": "3"}), {"cpu": 3000}),  # an init container's, larger
        (limited({"cpu": "1"}, parallelism=4), {"cpu": 4000}),  # every pod at once
        (limited({}), {}),
    ],
)
def test_a_workloads_limits_all_its_pods_at_once(
    obj: dict[str, Any], expected: dict[str, int]
) -> None:
    from jobrelay.kinds.job.adapter import JobKind

    assert limits_of(JobKind(), obj) == expected


def test_entry_keys_name_the_kind_as_a_quotas_count_does() -> None:
    from jobrelay.kinds.job.adapter import JobKind

    kind = JobKind()
    assert entry_key(WorkloadKey(kind.name, "a/j"), kind) == "Job a/j"


def _job(**metadata: Any) -> dict[str, Any]:
    from tests.unit.controller.builders import job

    obj = job()
    obj["metadata"].update(metadata)
    return obj


def test_a_workload_is_read_once_as_every_pass_and_verdict_needs_it() -> None:
    from tests.unit.controller.builders import JOB

    from jobrelay.admission.workload_reads import read_for_admission
    from jobrelay.vocabulary.names import (
        CLUSTER_ANNOTATION,
        PREEMPTED_BY_ANNOTATION,
        QUEUE_LABEL,
        REDISPATCH_ANNOTATION,
        REDISPATCH_NEVER,
    )

    obj = _job(resourceVersion="7", creationTimestamp="2026-01-01T00:00:00Z")
    obj["metadata"]["labels"][QUEUE_LABEL] = "team-a"
    obj["metadata"]["annotations"] = {
        CLUSTER_ANNOTATION: "w1", PREEMPTED_BY_ANNOTATION: " Job ns/w ",
        REDISPATCH_ANNOTATION: REDISPATCH_NEVER,
    }  # fmt: skip
    at = WorkloadKey(JOB.name, f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
    read = read_for_admission(at, JOB, obj, Priorities(), 3)
    assert read.version == ("7", 3)
    assert (read.named, read.cluster, read.placed) == ("team-a", "w1", True)
    assert (read.preempted_by, read.at_most_once, read.gone) == ("Job ns/w", True, False)
    assert read.entry is not None and read.entry.key == f"Job {at.key}"
    assert read.workload is not None and read.entry.requests == read.workload.demand


def test_templates_placement_cannot_read_leave_the_entry_out() -> None:
    from tests.unit.controller.builders import JOB

    from jobrelay.admission.workload_reads import read_for_admission

    at = WorkloadKey(JOB.name, "ns/j")
    broken = _job()
    broken["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    read = read_for_admission(at, JOB, broken, Priorities())
    assert read.entry is None and read.workload is None


def test_a_finished_or_deleted_workload_frees_its_queue() -> None:
    from tests.unit.controller.builders import COMPLETE, JOB

    from jobrelay.admission.workload_reads import released

    running, done = _job(), _job()
    done["status"] = COMPLETE
    assert released(JOB, running, done) and released(JOB, running, None)
    assert not released(JOB, running, running) and not released(JOB, done, done)


def test_reads_of_workloads_from_one_template_share_what_they_repeat() -> None:
    """Issue 36: a read is kept per held workload; its placement read, its request and
    limit totals and its namespace are one object across workloads that repeat them."""
    from jobrelay.admission.workload_reads import read_for_admission
    from jobrelay.kinds.job.adapter import JobKind

    kind = JobKind()

    def job(name: str, cpu: str) -> dict[str, Any]:
        container = {"name": "main", "resources": {"requests": {"cpu": cpu},
                                                   "limits": {"cpu": cpu}}}  # fmt: skip
        return {
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "resourceVersion": "1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"parallelism": 2, "template": {"spec": {"containers": [container]}}},
        }

    one, two, other = (
        read_for_admission(
            WorkloadKey(kind.name, f"team-a/{name}"), kind, job(name, cpu), Priorities()
        )
        for name, cpu in (("one", "2"), ("two", "2"), ("other", "3"))
    )
    assert one.workload is not None and one.entry is not None
    assert two.workload is one.workload and two.entry is not None
    assert two.entry.requests is one.entry.requests == {"cpu": 4000}
    assert two.entry.limits is one.entry.limits == {"cpu": 4000}
    assert two.entry.namespace is one.entry.namespace
    assert two.entry.key != one.entry.key
    assert other.workload != one.workload and other.entry is not None
    # Placement's fit likeness: one shared text for a template, another for another
    # template or another kind (each kind has its room).
    assert two.entry.likeness is one.entry.likeness and one.entry.likeness
    assert other.entry.likeness != one.entry.likeness
    assert fit_likeness("JobSet.v1alpha2.jobset.x-k8s.io", one.workload) != one.entry.likeness
    assert other.entry.requests == {"cpu": 6000}
