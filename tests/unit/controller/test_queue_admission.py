"""The thin I/O around admission: informers of its own, the queue a workload is shown in,
the figures handed to the status writer, idleness without queues or quotas."""

from __future__ import annotations

from typing import Any

from tests.unit.admission.support import figures, queue

from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.queue_model import QueueSpec
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission


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
                          queues=Queues(*specs), mirrored=lambda _key: False,
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
    made = QueueAdmission.watching(Manager(), queues=None, mirrored=lambda _key: False,  # type: ignore[arg-type]
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
