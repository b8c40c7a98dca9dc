"""The thin I/O around admission: informers of its own, the queue a workload is shown in,
the figures handed to the status writer, idleness without queues or quotas."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any

from tests.unit.admission.support import figures, queue

from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.priority_classes import PRIORITY_CLASS_NOT_ALLOWED
from jobrelay.admission.queue_model import Fleet, QueueSpec
from jobrelay.admission.workload_reads import WorkloadRead
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind


class Listed:
    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = list(objects)

    def values(self) -> list[dict[str, Any]]:
        return list(self.objects)


class Queues:
    def __init__(self, *specs: QueueSpec) -> None:
        self.queues = {spec.name: spec for spec in specs}

    def specs(self) -> dict[str, QueueSpec]:
        return dict(self.queues)


def admission(*specs: QueueSpec, quotas: Listed | None = None) -> QueueAdmission:
    return QueueAdmission(priority_classes=Listed(), quotas=quotas or Listed(),
                          queues=Queues(*specs), mirror_keys=frozenset,
                          memory=QueueMemory())  # fmt: skip


def test_the_queue_shown_is_admissions_choice() -> None:
    made = admission(queue("team-a", labels={"team": "a"}))
    made.namespace_changed("ns", {"team": "a"})
    assert made.queue_of("ns", "") == "team-a"  # by its namespace
    assert made.queue_of("ns", "nowhere") == ""  # a label naming no queue: in none
    made.namespace_changed("ns", None)
    assert made.queue_of("ns", "") == "" and made.queue_of("ns", "team-a") == ""


def test_the_figures_are_the_last_plans() -> None:
    made = admission(queue("team-a"))
    assert made.figures() == {}
    made.memory.last = AdmissionPlan(figures={"team-a": figures()}, fairness_error=0.0)
    assert made.figures() == {"team-a": figures()}


def test_without_queues_or_quotas_it_is_idle_and_forgets_the_last_plan() -> None:
    made = admission()
    made.memory.last = AdmissionPlan()
    assert made.idle() and made.memory.last is None
    quota = {"metadata": {"namespace": "ns"}, "spec": {"hard": {"requests.cpu": "1"}}}
    assert not admission(quotas=Listed(quota)).idle()
    assert not admission(queue("team-a")).idle()


async def test_watching_starts_and_stops_informers_of_its_own() -> None:
    class Manager:
        cluster = "manager"

    woken: list[int] = []
    made = QueueAdmission.watching(Manager(), queues=None, mirror_keys=frozenset,  # type: ignore[arg-type]
                                   memory=QueueMemory())  # fmt: skip
    made.on_needed = lambda: woken.append(1)
    assert len(made.informers) == 2 and made.specs() == {}
    started: list[str] = []
    for informer in made.informers:
        informer.start = lambda informer=informer: started.append("start")  # type: ignore[method-assign]

        async def nothing() -> None:
            started.append("done")

        informer.wait_synced = nothing  # type: ignore[method-assign]
        informer.stop = nothing  # type: ignore[method-assign]
    made.start()
    await made.wait_synced()
    await made.stop()
    assert started == ["start", "start", "done", "done", "done", "done"]
    made.needed()
    assert woken == [1]


def _job(priority_class: str, queue_label: str = "") -> dict[str, Any]:
    labels = {"jobrelay.dev/queue": queue_label} if queue_label else {}
    return {
        "metadata": {"name": "j", "namespace": "ns", "resourceVersion": "1", "labels": labels},
        "spec": {"template": {"spec": {"priorityClassName": priority_class,
                                       "containers": [{"name": "c", "image": "x"}]}}},
    }  # fmt: skip


def test_a_system_priority_class_is_refused_with_or_without_queues_or_quotas() -> None:

    kind, at = JobKind(), WorkloadKey("Job.v1.batch", "ns/j")
    for made in (admission(), admission(queue("team-a"))):
        hold = made.verdict(at, kind, _job("system-node-critical"))
        assert hold is not None and hold.reason == PRIORITY_CLASS_NOT_ALLOWED
        assert made.admit(at, kind, _job("system-node-critical")) == hold
        assert at not in made.memory.admitting  # never marked being placed
    assert admission().verdict(at, kind, _job("batch")) is None  # no queue: placed as it comes


def test_a_queue_listing_its_classes_refuses_any_other() -> None:

    listed = dataclasses.replace(queue("team-a"), allowed_priority_classes=frozenset({"batch"}))
    made = admission(listed)
    kind, at = JobKind(), WorkloadKey("Job.v1.batch", "ns/j")
    hold = made.verdict(at, kind, _job("urgent", "team-a"))
    assert hold is not None and hold.reason == PRIORITY_CLASS_NOT_ALLOWED
    assert "RelayQueue team-a does not allow PriorityClass 'urgent'" in hold.message
    allowed = made.verdict(at, kind, _job("batch", "team-a"))
    assert allowed is None or allowed.reason != PRIORITY_CLASS_NOT_ALLOWED


def test_a_pass_runs_with_the_collector_paused_and_leaves_it_on() -> None:
    kind, at = JobKind(), WorkloadKey("Job.v1.batch", "ns/j")
    asked: list[bool] = []

    def fits(_key: WorkloadKey, _workload: Any) -> bool:
        asked.append(gc.isenabled())
        return True

    made = admission(queue("team-a"))
    woken = made.run_pass([(at.kind, kind, {at.key: _job("", "team-a")})], [at], fits,
                          Fleet({"cpu": 1000}), None, lambda _key: False)  # fmt: skip
    assert woken == [at] and asked == [False]
    assert gc.isenabled()


def test_a_workload_is_read_anew_only_when_its_cached_object_changed() -> None:
    kind, at = JobKind(), WorkloadKey("Job.v1.batch", "ns/j")
    made = admission(queue("team-a"))
    cached = _job("", "team-a")

    def read_of(obj: dict[str, Any]) -> WorkloadRead:
        made.run_pass([(at.kind, kind, {at.key: obj})], [at], lambda _k, _w: False,
                      Fleet({"cpu": 1000}), None, lambda _key: False)  # fmt: skip
        read = made.memory.read(at)
        assert read is not None and read.key == at
        return read

    first = read_of(cached)
    assert read_of(cached) is first
    # The cache's very object is not looked into again: changed in place (caches never
    # do that), it still reads as it did.
    cached["metadata"]["resourceVersion"] = "9"
    assert read_of(cached) is first
    relisted = read_of(_job("", "team-a"))  # a relist's copy, the same resourceVersion
    assert relisted == first and relisted is not first
    assert relisted.source is not None and read_of(relisted.source) is relisted  # kept
    changed = _job("", "team-a")
    changed["metadata"]["resourceVersion"] = "2"
    changed["metadata"]["labels"] = {}  # out of its queue
    assert read_of(changed).named is None
