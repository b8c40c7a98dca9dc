"""What a worker snapshot says of capacity that can be provisioned
(controller/relay/provisioning_view.py), and the leader's sweep of leftover requests
(leader_passes.provisioning_keys): both read the worker's provisioning feed."""

from __future__ import annotations

from typing import Any

from tests.unit.controller.builders import JOB, NAME, NAMESPACE, UID, key_of
from tests.unit.controller.fakes import FakeCluster, FakePool, FakeWorker

from jobrelay.controller.leader_passes import provisioning_keys
from jobrelay.controller.relay.provisioning_view import provisioning_fields
from jobrelay.fleet.workers.definitions import WorkerView
from jobrelay.fleet.workers.provisioning_feed import slim_request
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.autoscaling_spec import AddableNodeShape, WorkerAutoscaling

KEY = key_of(JOB)
GROWS = WorkerAutoscaling((AddableNodeShape("16", "64Gi"),))


def fed(*tags: str) -> FakeWorker:
    worker = FakeWorker("w1", FakeCluster("w1"))
    for index, tag in enumerate(tags):
        request: dict[str, Any] = {
            "metadata": {"namespace": NAMESPACE, "name": f"r{index}",
                         "labels": {api.PROVISIONING_FOR_LABEL: UID},
                         "annotations": {api.PROVISIONING_WORKLOAD_ANNOTATION: tag}},
            "spec": {"provisioningClassName": api.CHECK_CAPACITY,
                     "podSets": [{"podTemplateRef": {"name": f"r{index}-0"}, "count": 1}]},
        }  # fmt: skip
        event = InformerEvent(Change.ADDED, f"{NAMESPACE}/r{index}", None, slim_request(request))
        worker.provisioning_feed._apply(event)
    return worker


def view(worker: FakeWorker, autoscaling: WorkerAutoscaling | None = GROWS) -> WorkerView:
    return WorkerView("w1", worker, False, None, {}, None, autoscaling)  # type: ignore[arg-type]


def test_a_worker_that_does_not_grow_adds_nothing() -> None:
    assert provisioning_fields(view(fed(), None), KEY) == {}


def test_the_workloads_requests_there_and_how_many_are_open() -> None:
    mine = f"{KEY.kind}:{NAMESPACE}/{NAME}"
    fields = provisioning_fields(view(fed(mine, "Job.v1.batch:team-a/other")), KEY)
    assert fields["autoscaling"] == GROWS and fields["open_requests"] == 2
    (seen,) = fields["provisioning"]
    assert (seen.name, seen.namespace, seen.workload_uid) == ("r0", NAMESPACE, UID)
    assert (seen.class_name, seen.templates, seen.deleting) == (
        api.CHECK_CAPACITY,
        ("r0-0",),
        False,
    )


def test_the_sweep_reconciles_every_workload_a_request_is_for() -> None:
    # The annotation is the worker's to write: other kinds, shapes and lengths are not queued.
    forged = ("Nope.v1:team-a/x", "Job.v1.batch:no-slash", "Job.v1.batch:a/b/c",
              "Job.v1.batch:team-a/" + "x" * 400)  # fmt: skip
    pool = FakePool(fed("Job.v1.batch:team-a/gone", "nonsense", "", *forged))
    found = provisioning_keys(pool, {"Job.v1.batch"})  # type: ignore[arg-type]
    assert found == {WorkloadKey("Job.v1.batch", "team-a/gone")}
