"""The read model's rows: what every view shows of a workload, a worker, a queue."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import job

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.standing import State
from jobrelay.readmodel.queue_rows import queue_row
from jobrelay.readmodel.worker_rows import resource_uses, worker_row
from jobrelay.readmodel.workload_rows import workload_row
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, PLACEMENTS_ANNOTATION, QUEUE_LABEL

JOB = JobKind()


def test_a_workloads_row_says_where_it_stands_runs_and_ran() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {CLUSTER_ANNOTATION: "w2", PLACEMENTS_ANNOTATION: "w1,w2"}
    obj["metadata"]["labels"] = {QUEUE_LABEL: "team-a"}
    obj["status"] = {"startTime": "2026-11-28T15:00:00Z", "active": 1}
    row = workload_row(JOB, obj)
    assert (row.kind, row.plural, row.state, row.worker, row.placements) == (
        "Job", "jobs", State.RUNNING, "w2", ("w1", "w2"),
    )  # fmt: skip
    assert (row.queue, row.active, row.failed, row.completions) == ("team-a", "1", "-", "0/1")
    assert workload_row(JOB, obj, queue="").queue == ""  # as admission chose: none


def test_a_workers_row_reads_its_status_and_capacity() -> None:
    registration = {
        "metadata": {"name": "w1"},
        "status": {
            "kubernetesVersion": "v1.35.4",
            "conditions": [{"type": "Connected", "status": "False", "reason": "Unreachable",
                            "message": "no answer"}],
            "capacity": {"nodes": 2, "schedulableNodes": 1,
                         "allocatable": {"cpu": "4", "memory": "0"},
                         "requested": {"cpu": "1"}, "reserved": {"cpu": "500m"}},
        },
    }  # fmt: skip
    row = worker_row(registration)
    assert (row.name, row.version, row.nodes, row.schedulable_nodes) == ("w1", "v1.35.4", 2, 1)
    assert row.message == "Unreachable: no answer"
    assert list(row.resources) == ["cpu"]  # none of memory: not shown
    assert row.resources["cpu"].text == "1500m/4 (38%)"
    assert resource_uses({"allocatable": {"cpu": "lots"}}) == {}


def test_a_queues_row_reads_its_spec_and_status() -> None:
    queue = {
        "metadata": {"name": "team-a"},
        "spec": {"weight": 2, "nominalQuota": {"cpu": "8"}},
        "status": {"pending": 3, "fairShare": 0.5,
                   "conditions": [{"type": "Valid", "status": "False", "reason": "BadSelector"}]},
    }  # fmt: skip
    row = queue_row(queue)
    assert (row.name, row.weight, row.pending, row.admitted) == ("team-a", 2, 3, None)
    assert (row.valid, row.message, row.fair_share) == (False, "BadSelector", 0.5)
    assert row.nominal_quota == {"cpu": "8"}


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


# The apiserver keeps a custom resource's spec and status objects (the CRDs say so); what is
# in them is anyone's with write access to it.
_OBJECT = st.dictionaries(st.sampled_from(["capacity", "conditions", "weight", "pending",
                                           "usage", "fairShare", "nodes", "x"]), _ANY_JSON)  # fmt: skip


@given(spec=_OBJECT, status=_OBJECT)
def test_rows_of_any_object_never_raise(spec: Any, status: Any) -> None:
    obj = {"metadata": {"name": "x"}, "spec": spec, "status": status}
    queue_row(obj)
    worker_row(obj)
