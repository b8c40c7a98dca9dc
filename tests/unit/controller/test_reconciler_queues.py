"""The reconciler's side of fleet-wide queues: a queued workload is first placed only when
the admission pass admits it; a queue that does not exist or does not take the namespace
holds it; the namespace's ResourceQuota on the manager bounds what is admitted from it;
admitted means placed, so a restarted controller counts the same."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.unit.controller.builders import JOB, NAMESPACE, job
from tests.unit.controller.test_reconciler import Env, make_env, workers
from tests.unit.placement.support import node

from jobrelay.admission.queue_model import LabelSelector, QueueSpec
from jobrelay.admission.workload_reads import released, slim_priority_class, slim_resource_quota
from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.controller.relay.plan import Place
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.admission_probes import ALLOWED
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, NOT_PLACED_ANNOTATION, QUEUE_LABEL

ROOMY = WorkerCapacity((node("n1", "16"),))


class Listed:
    def __init__(self, *objects: JsonObj) -> None:
        self.objects = list(objects)

    def values(self) -> list[dict[str, Any]]:
        return list(self.objects)


class Queues:
    def __init__(self, *specs: QueueSpec) -> None:
        self.queues = {s.name: s for s in specs}

    def specs(self) -> dict[str, QueueSpec]:
        return dict(self.queues)


def team_a(cpu: int = 4, **more: Any) -> QueueSpec:
    return QueueSpec("team-a", nominal={"cpu": cpu * 1000}, borrowing_limit={"cpu": 0},
                     namespace_selector=LabelSelector({"team": "a"}), **more)  # fmt: skip


def asking(name: str, cpu: str = "1", *, queue: str | None = "team-a", **meta: Any) -> JsonObj:
    obj = job()
    obj["metadata"]["name"] = name
    obj["metadata"]["creationTimestamp"] = meta.pop("created", "2026-03-01T12:00:00Z")
    if queue is not None:
        obj["metadata"]["labels"][QUEUE_LABEL] = queue
    spec = obj["spec"]["template"]["spec"]
    spec["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    spec.update(meta)
    return obj


def key(name: str) -> WorkloadKey:
    return WorkloadKey(JOB.name, f"{NAMESPACE}/{name}")


class QueueEnv:
    def __init__(
        self, env: Env, admission: QueueAdmission, quotas: Listed, classes: Listed
    ) -> None:
        self.env, self.admission, self.quotas, self.classes = env, admission, quotas, classes

    def submit(self, *objects: JsonObj) -> None:
        for obj in objects:
            self.env.submit(obj)

    async def reconcile(self, *names: str) -> None:
        for name in names:
            await self.env.reconciler.reconcile(key(name))
        self.env.catch_up()

    def placed(self) -> list[str]:
        return sorted(
            obj["metadata"]["name"]
            for (plural, _ns, _n), obj in self.env.manager.objects.items()
            if plural == "jobs" and CLUSTER_ANNOTATION in (obj["metadata"].get("annotations") or {})
        )

    def said(self, name: str) -> str | None:
        obj = self.env.manager.get("jobs", f"{NAMESPACE}/{name}")
        assert obj is not None
        return (obj["metadata"].get("annotations") or {}).get(NOT_PLACED_ANNOTATION)

    def passed(self) -> list[str]:
        return [k.name for k in self.env.reconciler.placeable_held()]


@pytest.fixture
async def qenv() -> AsyncIterator[QueueEnv]:
    (w1,) = workers("w1", capacity_forbidden=False)
    w1.nodes = ROOMY
    async for env in make_env(w1):
        quotas, classes = Listed(), Listed()
        admission = QueueAdmission(
            priority_classes=classes,
            quotas=quotas,
            queues=Queues(
                team_a(), QueueSpec("team-b", namespace_selector=LabelSelector({"x": "y"}))
            ),
            mirror_keys=lambda env=env: {k for w in env.workers.values() for k in w.cache},
            memory=env.memory.queues,
        )
        admission.namespace_changed(NAMESPACE, {"team": "a"})
        env.reconciler.queue_admission = admission
        yield QueueEnv(env, admission, quotas, classes)


async def test_a_queue_never_admits_beyond_its_quota(qenv: QueueEnv) -> None:
    names = [f"j{i}" for i in range(6)]
    qenv.submit(*(asking(n) for n in names))
    # No pass has judged them yet: they wait a moment, told nothing.
    await qenv.reconcile(*names)
    assert qenv.placed() == [] and qenv.env.events.reasons() == []
    assert qenv.passed() == names[:4]
    await qenv.reconcile(*names)
    assert qenv.placed() == names[:4]
    assert qenv.env.events.reasons().count("QueueQuotaExceeded") == 2
    said = qenv.said("j4")
    assert said is not None and said.startswith("QueueQuotaExceeded: team-a: 5 of 4 cpu")
    # Again: the admitted ones count (they are placed), nothing more is admitted.
    assert qenv.passed() == []
    await qenv.reconcile(*names)
    assert qenv.placed() == names[:4]
    assert qenv.env.events.reasons().count("QueueQuotaExceeded") == 2  # told once


async def test_a_restarted_controller_counts_the_placed_ones(qenv: QueueEnv) -> None:
    names = [f"j{i}" for i in range(5)]
    qenv.submit(*(asking(n) for n in names))
    assert qenv.passed() == names[:4]
    await qenv.reconcile(*names)
    assert qenv.placed() == names[:4]
    fresh = QueueAdmission(priority_classes=qenv.classes, quotas=qenv.quotas,
                           queues=qenv.admission.queues, mirror_keys=frozenset,
                           memory=QueueMemory())  # fmt: skip
    qenv.env.reconciler.queue_admission = fresh
    assert qenv.passed() == []


async def test_a_high_priority_workload_submitted_last_goes_first(qenv: QueueEnv) -> None:
    qenv.classes.objects.append(slim_priority_class({"metadata": {"name": "high"}, "value": 1000}))
    qenv.admission.priorities_changed()
    low = [asking(f"low{i}", "2", created=f"2026-03-01T12:00:0{i}Z") for i in range(3)]
    high = asking("high", "2", created="2026-03-01T12:10:00Z", priorityClassName="high")
    qenv.submit(*low, high)
    assert qenv.passed() == ["high", "low0"]


@pytest.mark.parametrize(
    ("queue", "namespace_labels", "reason"),
    [
        ("team-x", {}, "QueueNotFound"),
        ("team-b", {"x": "z"}, "QueueNotAllowed"),
    ],
)
async def test_a_queue_that_cannot_take_it_holds_it_with_a_warning(
    qenv: QueueEnv, queue: str, namespace_labels: dict[str, str], reason: str
) -> None:
    qenv.admission.namespace_changed(NAMESPACE, namespace_labels)
    qenv.submit(asking("j", queue=queue))
    await qenv.reconcile("j")
    assert qenv.placed() == []
    assert qenv.env.events.reasons() == [reason]
    said = qenv.said("j")
    assert said is not None and said.startswith(f"{reason}: ")
    assert qenv.passed() == []
    # The queue comes: the next reconcile (a RelayQueue event brings it) places it.
    assert isinstance(qenv.admission.queues, Queues)
    qenv.admission.queues.queues[queue] = QueueSpec(queue)
    assert qenv.passed() == ["j"]
    await qenv.reconcile("j")
    assert qenv.placed() == ["j"]


async def test_the_namespaces_resource_quota_bounds_unqueued_work(qenv: QueueEnv) -> None:
    qenv.quotas.objects.append(slim_resource_quota(
        {"metadata": {"name": "q", "namespace": NAMESPACE}, "spec": {"hard": {"requests.cpu": "2"}}}
    ))  # fmt: skip
    qenv.admission.namespace_changed(NAMESPACE, {})  # no queue takes it
    names = ["a", "b", "c"]
    qenv.submit(*(asking(n, queue=None) for n in names), asking("big", "10", queue=None))
    await qenv.reconcile(*names, "big")  # before any pass: a moment's wait
    assert qenv.placed() == []
    qenv.passed()
    await qenv.reconcile(*names, "big")
    assert qenv.placed() == ["a", "b"]
    warned = [r for r in qenv.env.events.reasons() if r != "Dispatched"]
    assert sorted(warned) == ["ExceedsNamespaceQuota", "NamespaceQuotaExceeded"]
    said = qenv.said("big")
    assert said is not None and said.startswith("ExceedsNamespaceQuota: ")
    assert qenv.passed() == []
    # One finishes: the next pass admits the next one, and its reconcile places it.
    finished = qenv.env.manager.get("jobs", f"{NAMESPACE}/a")
    assert finished is not None
    finished["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    finished["metadata"]["resourceVersion"] += "-done"  # a status write is a new version
    qenv.env.catch_up()
    assert qenv.passed() == ["c"]
    await qenv.reconcile("c")
    assert qenv.placed() == ["a", "b", "c"]


async def test_reconciles_at_once_never_share_the_last_of_a_quota(qenv: QueueEnv) -> None:
    qenv.admission.namespace_changed(NAMESPACE, {})
    qenv.quotas.objects.append(slim_resource_quota(
        {"metadata": {"name": "q", "namespace": NAMESPACE}, "spec": {"hard": {"requests.cpu": "1"}}}
    ))  # fmt: skip
    qenv.submit(asking("a", queue=None), asking("b", queue=None))
    qenv.passed()  # neither is held yet: the pass judges nothing unqueued
    # Both reconcile before the cache shows either placement.
    for name in ("a", "b"):
        await qenv.env.reconciler.reconcile(key(name))
    assert qenv.placed() == ["a"]


async def test_without_queues_or_quotas_everything_is_placed_as_today(qenv: QueueEnv) -> None:
    qenv.admission.namespace_changed(NAMESPACE, {})
    qenv.submit(asking("a", queue=None), asking("b", queue=None))
    await qenv.reconcile("a", "b")
    assert qenv.placed() == ["a", "b"]
    assert qenv.env.events.reasons() == ["Dispatched", "Dispatched"]


def test_a_finished_or_deleted_workload_frees_its_queue_for_a_pass() -> None:
    # No worker's capacity need change when a Job's own status comes last: the finish
    # itself must wake the pass, or the queue's next workloads wait on the backstop.
    running = asking("a")
    done = asking("a")
    done["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert released(JOB, running, done)
    assert released(JOB, running, None)
    assert not released(JOB, running, running)
    assert not released(JOB, done, done)


async def test_a_workload_that_finished_before_any_pass_saw_it_placed_frees_its_quota(
    qenv: QueueEnv,
) -> None:
    qenv.admission.namespace_changed(NAMESPACE, {})
    qenv.quotas.objects.append(slim_resource_quota(
        {"metadata": {"name": "q", "namespace": NAMESPACE}, "spec": {"hard": {"requests.cpu": "1"}}}
    ))  # fmt: skip
    qenv.submit(asking("a", queue=None), asking("b", queue=None))
    qenv.passed()
    await qenv.reconcile("a", "b")
    assert qenv.placed() == ["a"]
    finished = qenv.env.manager.get("jobs", f"{NAMESPACE}/a")
    assert finished is not None
    finished["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    finished["metadata"]["resourceVersion"] += "-done"  # a status write is a new version
    qenv.env.catch_up()
    assert qenv.passed() == ["b"]
    await qenv.reconcile("b")
    assert qenv.placed() == ["a", "b"]


@pytest.mark.parametrize(
    ("hard", "limits"),
    [
        ({"count/jobs.batch": "1"}, None),
        ({"limits.cpu": "1"}, {"cpu": "1"}),
    ],
)
async def test_a_quota_on_jobs_or_limits_counts_them(
    qenv: QueueEnv, hard: dict[str, str], limits: dict[str, str] | None
) -> None:
    qenv.admission.namespace_changed(NAMESPACE, {})
    qenv.quotas.objects.append(slim_resource_quota(
        {"metadata": {"name": "q", "namespace": NAMESPACE}, "spec": {"hard": hard}}
    ))  # fmt: skip
    for name in ("a", "b"):
        obj = asking(name, queue=None)
        if limits is not None:
            obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = limits
        qenv.submit(obj)
    qenv.passed()
    await qenv.reconcile("a", "b")
    assert qenv.placed() == ["a"]
    said = qenv.said("b")
    assert said is not None and said.startswith("NamespaceQuotaExceeded: ")


async def test_a_queue_below_its_nominal_reclaims_from_one_above(qenv: QueueEnv) -> None:
    from jobrelay.admission.queue_model import Reclaim
    from jobrelay.vocabulary.names import PREEMPTED_BY_ANNOTATION

    assert isinstance(qenv.admission.queues, Queues)
    qenv.admission.queues.queues = {
        "team-a": QueueSpec("team-a", nominal={"cpu": 2000}),
        "team-b": QueueSpec("team-b", nominal={"cpu": 2000}, reclaim=Reclaim.ANY),
    }
    (w1,) = qenv.env.workers.values()
    w1.nodes = WorkerCapacity((node("n1", "4"),))
    flood = [asking(f"a{i}", created=f"2026-03-01T12:00:0{i}Z") for i in range(4)]
    qenv.submit(*flood)
    assert qenv.passed() == ["a0", "a1", "a2", "a3"]  # team-a borrows the whole fleet
    await qenv.reconcile("a0", "a1", "a2", "a3")
    # Their placements reserve the node's 4 CPUs (the fake worker makes no pods).
    qenv.submit(asking("b0", queue="team-b", created="2026-03-01T12:10:00Z"))
    # No room, and team-b is below its nominal: the newest of team-a is preempted.
    assert qenv.passed() == ["a3"]
    await qenv.reconcile("a3", "b0")
    a3 = qenv.env.manager.get("jobs", f"{NAMESPACE}/a3")
    assert a3 is not None
    assert a3["metadata"]["annotations"][PREEMPTED_BY_ANNOTATION] == "Job default/b0".replace(
        "default", NAMESPACE
    )
    reasons = qenv.env.events.reasons()
    assert reasons.count("Preempted") == 1 and reasons.count("Preempting") == 1
    # The next passes count a3's room as coming: nobody else is preempted.
    assert qenv.passed() == []
    assert qenv.passed() == []
    await qenv.reconcile("b0")
    assert qenv.env.events.reasons().count("Preempting") == 1  # told once


async def test_a_snapshot_reads_the_last_plan_and_changes_nothing(qenv: QueueEnv) -> None:
    woken: list[int] = []
    qenv.admission.on_needed = lambda: woken.append(1)
    qenv.submit(asking("j"))
    reconciler, runtime = qenv.env.reconciler, qenv.env.reconciler._kinds[JOB.name]
    memory = qenv.env.memory.queues
    snapshot = reconciler.snapshot(key("j"), runtime)
    assert snapshot.queue_hold is not None and not snapshot.queue_hold.settled
    # Nothing marked, nothing read into memory, no pass woken: asking changed nothing.
    assert (memory.admitting, memory.reads, memory.last, woken) == ({}, {}, None, [])
    # The reconcile acting on that hold wakes the pass.
    await qenv.reconcile("j")
    assert woken and qenv.placed() == []
    assert qenv.passed() == ["j"]
    snapshot = reconciler.snapshot(key("j"), runtime)
    assert snapshot.queue_hold is None and memory.admitting == {}
    # The decision to place it marks it being placed; its placement in the cache ends that.
    await qenv.env.reconciler.reconcile(key("j"))
    assert list(memory.admitting) == [key("j")]
    qenv.env.catch_up()
    qenv.passed()
    assert memory.admitting == {} and qenv.placed() == ["j"]


async def test_a_quota_taken_between_snapshot_and_decision_holds_it_after_all(
    qenv: QueueEnv,
) -> None:
    qenv.admission.namespace_changed(NAMESPACE, {})
    qenv.quotas.objects.append(slim_resource_quota(
        {"metadata": {"name": "q", "namespace": NAMESPACE}, "spec": {"hard": {"requests.cpu": "1"}}}
    ))  # fmt: skip
    qenv.submit(asking("a", queue=None), asking("b", queue=None))
    qenv.passed()
    reconciler, runtime = qenv.env.reconciler, qenv.env.reconciler._kinds[JOB.name]
    seen = reconciler.snapshot(key("b"), runtime)
    assert seen.queue_hold is None  # b may go, as far as the last plan says
    await reconciler.reconcile(key("a"))  # meanwhile a takes the last CPU
    seen = dataclasses.replace(seen, admission=ALLOWED)  # the manager's admission allowed it
    placing = decide(seen)
    assert any(isinstance(action, Place) for action in placing.actions)
    changed = reconciler._admit(key("b"), JOB, seen, placing)
    assert changed is not None and changed.reason == "NamespaceQuotaExceeded"
    assert list(qenv.env.memory.queues.admitting) == [key("a")]


async def test_a_victim_chosen_is_told_to_its_reconcile_until_marked(qenv: QueueEnv) -> None:
    from jobrelay.admission.queue_model import Preempt

    memory = qenv.env.memory.queues
    memory.chose({key("x"): Preempt("Job default/w", "preempted by w")})
    runtime = qenv.env.reconciler._kinds[JOB.name]
    qenv.submit(asking("x"))
    assert qenv.env.reconciler.snapshot(key("x"), runtime).preempt == Preempt(
        "Job default/w", "preempted by w"
    )
    memory.expire()  # not read as placed: nothing to preempt any more
    assert qenv.admission.preemption(key("x")) is None


def preset(obj: JsonObj, cluster: str = "w1") -> JsonObj:
    """Created with jobrelay's cluster annotation already set (no admission policy stops it)."""
    obj["metadata"].setdefault("annotations", {})[CLUSTER_ANNOTATION] = cluster
    return obj


def mirrored(qenv: QueueEnv, name: str) -> bool:
    return qenv.env.workers["w1"].cluster.get("jobs", f"{NAMESPACE}/{name}") is not None


async def test_a_preset_placement_waits_in_its_queue_and_gets_no_mirror_past_its_quota(
    qenv: QueueEnv,
) -> None:
    names = [f"j{i}" for i in range(4)]
    qenv.submit(*(asking(n) for n in names))
    assert qenv.passed() == names
    await qenv.reconcile(*names)
    assert qenv.placed() == names  # the queue's 4 CPUs are taken
    qenv.submit(preset(asking("jump", created="2026-03-01T11:00:00Z")))
    assert qenv.passed() == []  # judged as pending: the queue is full
    await qenv.reconcile("jump", "jump")
    said = qenv.said("jump")
    assert said is not None and said.startswith("QueueQuotaExceeded: team-a: 5 of 4 cpu")
    assert not mirrored(qenv, "jump")
    assert "QueueQuotaExceeded" in qenv.env.events.reasons()


async def test_a_preset_placement_admitted_is_placed_by_jobrelay_before_its_mirror(
    qenv: QueueEnv,
) -> None:
    qenv.submit(preset(asking("early")))
    assert qenv.passed() == ["early"]
    await qenv.reconcile("early")
    placed = qenv.env.manager.get("jobs", f"{NAMESPACE}/early")
    assert placed is not None
    annotations = placed["metadata"]["annotations"]
    assert annotations["jobrelay.dev/placements"] == "w1"  # jobrelay's placement now
    await qenv.reconcile("early")
    assert mirrored(qenv, "early")


async def test_a_preset_placement_naming_a_system_priority_class_gets_no_mirror(
    qenv: QueueEnv,
) -> None:
    qenv.submit(preset(asking("critical", queue=None, priorityClassName="system-node-critical")))
    await qenv.reconcile("critical", "critical")
    said = qenv.said("critical")
    assert said is not None and said.startswith("PriorityClassNotAllowed: ")
    assert not mirrored(qenv, "critical")
