"""The reconciler: snapshots from caches, the decide/execute loop, fresh reads, the queue's answer.

Real decide and executor, in-memory apiservers (fakes.FakeCluster) and caches
that change only when a test refreshes them, so every lag a real cache has
can be staged.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.unit.controller.builders import (
    COMPLETE,
    CONTROLLER,
    CREATED_LOOK,
    JOB,
    NAME,
    NAMESPACE,
    NOW,
    RUNNING,
    SETTINGS,
    UID,
    job,
    key_of,
    mirror,
)
from tests.unit.controller.fakes import (
    FakeCluster,
    FakeEvents,
    FakeInformer,
    FakePool,
    FakeWorker,
    executor_over,
)

from jobrelay.controller.instrument import Instruments
from jobrelay.controller.relay import admission as admission_module
from jobrelay.controller.relay import reconciler as reconciler_module
from jobrelay.controller.relay.admission import Admission, probe_digest
from jobrelay.controller.relay.executor import Executor
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.plan import Plan, ReadFresh
from jobrelay.controller.relay.reconciler import KindRuntime, Reconciler
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.mirror_creation import CREATE_PENDING_LOOK
from jobrelay.controller.relay.steps.mirror_record import RECORD_AFTER
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, MIRRORS_ANNOTATION
from jobrelay.vocabulary.outcome import Done, Lane, RequeueAfter, Retry, Terminal
from jobrelay.vocabulary.timestamps import utc_now

KEY = key_of(JOB)
HELD_RETRY = RequeueAfter(SETTINGS.unplaceable_retry, Lane.BACKGROUND)
DONE = Done()


def back_for_its_record(outcome: object) -> bool:
    """Done but for the record of a mirror created here: back in the background lane
    when it is due (steps/mirror_record.py)."""
    return (
        isinstance(outcome, RequeueAfter)
        and outcome.lane is Lane.BACKGROUND
        and 0 < outcome.seconds <= RECORD_AFTER
    )


@dataclass
class Env:
    manager: FakeCluster
    workers: dict[str, FakeWorker]
    informer: FakeInformer
    events: FakeEvents
    executor: Executor
    reconciler: Reconciler
    memory: RelayMemory
    admission: Admission
    # Seconds added to the memory's monotonic clock (what it keeps for a second or more).
    skew: list[float] = field(default_factory=lambda: [0.0])

    def later(self, seconds: float) -> None:
        """The memory's clock moves on by ``seconds`` (no real wait)."""
        self.skew[0] += seconds

    def submit(self, obj: JsonObj) -> JsonObj:
        """A user creates the management object; the cache shows it."""
        stored = self.manager.put("jobs", obj)
        self.informer.refresh(self.manager, JOB)
        return stored

    def stored(self) -> JsonObj | None:
        return self.manager.get("jobs", KEY.key)

    def placement(self) -> str | None:
        stored = self.stored()
        assert stored is not None
        return (stored["metadata"].get("annotations") or {}).get(CLUSTER_ANNOTATION)

    def mirror_on(self, name: str) -> JsonObj | None:
        return self.workers[name].cluster.get("jobs", KEY.key)

    def catch_up(self) -> None:
        """Every cache catches up with its apiserver."""
        self.informer.refresh(self.manager, JOB)
        for worker in self.workers.values():
            worker.refresh(JOB, CONTROLLER)

    async def reconcile(self) -> Any:
        return await self.reconciler.reconcile(KEY)


async def make_env(*workers: FakeWorker) -> AsyncIterator[Env]:
    manager = FakeCluster("manager")
    pool = FakePool(*workers)
    informer = FakeInformer()
    events = FakeEvents()
    client = manager.client()
    skew = [0.0]
    memory = RelayMemory(monotonic=lambda: time.monotonic() + skew[0])
    admission = Admission(client)
    executor = executor_over(client, pool, events, memory=memory)
    reconciler = Reconciler(
        {JOB.name: KindRuntime(JOB, informer)},  # type: ignore[arg-type]
        pool,  # type: ignore[arg-type]
        executor,
        SETTINGS,
        manager=client,
        memory=memory,
        admission=admission,
        clock=lambda: NOW,
    )
    yield Env(
        manager, {w.name: w for w in workers}, informer, events, executor, reconciler, memory,
        admission, skew,
    )  # fmt: skip
    await client.aclose()
    await pool.aclose()


def workers(*names: str, **kwargs: Any) -> list[FakeWorker]:
    return [FakeWorker(name, FakeCluster(name), **kwargs) for name in names]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    w1, w2 = workers("w1", "w2")
    w1.active = 2  # w2 is the least loaded
    async for value in make_env(w1, w2):
        yield value


# -- the queue's answers ----------------------------------------------------------------


async def test_a_kind_no_longer_configured_is_dropped(env: Env) -> None:
    assert await env.reconciler.reconcile(WorkloadKey("Gone.v1.example.com", "a/b")) == DONE


async def test_a_new_job_is_placed_and_dispatched_then_followed_to_the_end(env: Env) -> None:
    env.submit(job())
    assert await env.reconcile() == CREATED_LOOK
    assert env.placement() == "w2"
    created = env.mirror_on("w2")
    assert created is not None and env.mirror_on("w1") is None
    assert env.events.reasons() == ["Dispatched"]

    # Our placement patch brings the key back before any cache shows the mirror:
    # the create is expected, so nothing is created twice; it looks again shortly (the
    # create's echo, which shows what the create's answer told, is not looked at).
    env.informer.refresh(env.manager, JOB)
    assert await env.reconcile() == RequeueAfter(CREATE_PENDING_LOOK)
    assert len(env.workers["w2"].cluster.writes()) == 1

    # The worker runs it.
    created["status"] = dict(RUNNING)
    env.catch_up()
    assert back_for_its_record(await env.reconcile())
    stored = env.stored()
    assert stored is not None and stored["status"]["active"] == 1

    # ... to the end: final status copied (its Complete condition tells the user: no
    # Completed Event by default), mirror deleted.
    created["status"] = dict(COMPLETE)
    env.catch_up()
    assert await env.reconcile() == DONE
    stored = env.stored()
    assert stored is not None and JOB.is_finished(stored)
    assert env.events.reasons() == ["Dispatched"]
    assert env.mirror_on("w2") is None

    # The worker's cache shows the delete before the management cache shows the
    # final status: the mirror must not be created again from the stale object.
    env.workers["w2"].refresh(JOB, CONTROLLER)
    cached = env.informer.get(KEY.key)
    assert cached is not None and not JOB.is_finished(cached)
    assert await env.reconcile() == DONE
    assert env.mirror_on("w2") is None and env.mirror_on("w1") is None
    env.catch_up()
    assert await env.reconcile() == DONE
    assert env.mirror_on("w2") is None and env.mirror_on("w1") is None
    assert env.events.reasons() == ["Dispatched"]


async def test_no_worker_requeues_after_the_settings_delay_in_the_background() -> None:
    async for env in make_env():
        env.submit(job())
        # Held: capacity changes bring it back when it fits; the retry is a backstop.
        assert await env.reconcile() == HELD_RETRY
        assert env.events.reasons() == ["NotPlaced"]


async def test_retry_is_backed_off(env: Env) -> None:
    env.submit(job(placed="w1"))
    env.workers["w1"].synced_kinds = set()
    answer = await env.reconcile()
    assert isinstance(answer, Retry)
    assert "has not listed" in answer.why


async def test_a_lost_race_is_retried(env: Env) -> None:
    stale = job()
    env.submit(stale)
    env.manager.put("jobs", env.stored())  # changed meanwhile; the cache shows the old one
    assert isinstance(await env.reconcile(), Retry)
    assert env.placement() is None
    assert env.executor.memory.reservations.count("w2") == 0


async def test_terminal_records_a_warning_event_and_no_retry(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(JobKind, "status_violations", lambda _self, _old, _new: ["rule 99"])
    env.submit(job(placed="w1", annotations={MIRRORS_ANNOTATION: "1:w1:m-1"}))
    env.workers["w1"].cache[KEY] = mirror(job(), status=RUNNING)
    answer = await env.reconcile()
    assert isinstance(answer, Terminal) and answer.retry_after is None  # no retry
    assert [(e.type, e.reason) for e in env.events.recorded] == [("Warning", "StatusNotCopied")]
    assert "rule 99" in env.events.recorded[0].message


async def test_a_moved_annotation_keeps_following_the_running_mirror(env: Env) -> None:
    # Its mirror on w2 is the one jobrelay created (recorded); the annotations were edited.
    env.submit(job(placed="w1", annotations={MIRRORS_ANNOTATION: "1:w2:m-1"}))
    env.workers["w2"].cache[KEY] = mirror(job(), status=RUNNING)
    assert await env.reconcile() == DONE
    assert [(e.type, e.reason) for e in env.events.recorded] == [("Warning", "PlacementConflict")]
    assert env.mirror_on("w1") is None
    # The placement is set to where the mirror runs, and the mirror followed there.
    assert env.stored()["metadata"]["annotations"][CLUSTER_ANNOTATION] == "w2"
    env.informer.refresh(env.manager, JOB)
    assert await env.reconcile() == DONE
    assert (env.stored().get("status") or {}).get("active") == 1


async def test_terminal_with_a_retry_after_is_requeued_then(env: Env) -> None:
    env.submit(job(placed="w1"))
    env.workers["w1"].cluster.fail("POST", "/jobs", 403, "Forbidden")
    answer = await env.reconcile()
    assert isinstance(answer, Terminal) and answer.reason == "MirrorRejected"
    assert answer.retry_after == 30.0
    (event,) = env.events.recorded
    assert (event.type, event.reason) == ("Warning", "MirrorRejected")
    assert "HTTP 403 Forbidden" in event.message
    # The refused create is over: a mirror's first event there is looked at again.
    assert not env.memory.is_create_echo("w1", KEY, "m-9", "1")


async def test_a_mirror_a_worker_rejects_is_counted_as_a_terminal_reconcile(env: Env) -> None:
    instruments = Instruments()
    env.submit(job(placed="w1"))
    env.workers["w1"].cluster.fail("POST", "/jobs", 403, "Forbidden")
    answer = await instruments.reconcile(env.reconciler.reconcile)(KEY)
    assert isinstance(answer, Terminal) and answer.reason == "MirrorRejected"
    samples = {
        sample.labels["result"]: sample.value
        for family in text_string_to_metric_families(instruments.metrics.render().decode())
        for sample in family.samples
        if sample.name == "jobrelay_reconcile_duration_seconds_count"
    }
    assert samples == {"terminal": 1.0}


async def test_terminal_for_an_object_gone_from_the_cache_has_no_event(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = Terminal("X", "msg", retry_after=2.0)
    monkeypatch.setattr(reconciler_module, "decide", lambda s: Plan((), terminal))
    assert await env.reconcile() == terminal
    assert env.events.recorded == []


async def test_a_decision_that_never_settles_backs_off(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Snapshot] = []

    def never_settles(s: Snapshot) -> Plan:
        seen.append(s)
        return Plan((), ReadFresh(obj=True))

    monkeypatch.setattr(reconciler_module, "decide", never_settles)
    env.submit(job())
    answer = await env.reconcile()
    assert isinstance(answer, Retry)
    assert len(seen) == reconciler_module._MAX_ROUNDS
    assert all(s.fresh for s in seen[1:])


# -- the manager's admission -----------------------------------------------------------

PRIVILEGED_REFUSAL = (
    403,
    "Forbidden",
    'pods "jobrelay-admission-probe-x7k2q" is forbidden: violates PodSecurity '
    '"restricted:latest": privileged (container "main" must not set '
    "securityContext.privileged=true)",
)


def with_pod_spec(obj: JsonObj, **spec: Any) -> JsonObj:
    obj["spec"]["template"]["spec"].update(spec)
    return obj


async def test_a_new_job_is_placed_only_after_the_managers_admission_admits_its_pods(
    env: Env,
) -> None:
    env.submit(with_pod_spec(job(), serviceAccountName="trainer", priorityClassName="high"))
    assert await env.reconcile() == CREATED_LOOK
    (probe,) = env.manager.dry_runs()
    # A Pod of the template, in the Job's namespace; its ServiceAccount and PriorityClass
    # are judged: they must exist here (and the class's quota scopes apply).
    assert probe["metadata"] == {
        "generateName": "jobrelay-admission-probe-",
        "namespace": NAMESPACE,
    }
    assert probe["spec"]["serviceAccountName"] == "trainer"
    assert probe["spec"]["priorityClassName"] == "high"
    assert probe["spec"]["containers"] == job()["spec"]["template"]["spec"]["containers"]
    assert env.placement() == "w2" and env.mirror_on("w2") is not None


async def test_a_job_the_managers_pod_security_refuses_runs_nowhere_and_says_why(
    env: Env,
) -> None:
    env.manager.pod_admission = PRIVILEGED_REFUSAL
    env.submit(job())
    # Not held (nothing about capacity brings it back): retried in the lane it came in.
    assert await env.reconcile() == RequeueAfter(SETTINGS.unplaceable_retry)
    assert env.placement() is None
    assert all(w.cluster.writes() == [] for w in env.workers.values())
    (event,) = env.events.recorded
    assert (event.type, event.reason) == ("Warning", "PodSecurityViolation")
    # Kubernetes' own wording, without the probe pod's name.
    assert 'violates PodSecurity "restricted:latest": privileged (container "main"' in event.message
    assert "jobrelay-admission-probe" not in event.message

    # The namespace is relabelled (or the Job fixed): the next attempt asks again and places.
    env.manager.pod_admission = None
    assert await env.reconcile() == CREATED_LOOK
    assert env.placement() == "w2"


async def test_a_service_account_missing_on_the_manager_holds_the_job_until_it_exists(
    env: Env,
) -> None:
    env.manager.pod_admission = (
        403, "Forbidden",
        'pods "jobrelay-admission-probe-" is forbidden: error looking up service account '
        f'{NAMESPACE}/trainer: serviceaccount "trainer" not found',
    )  # fmt: skip
    env.submit(with_pod_spec(job(), serviceAccountName="trainer"))
    assert await env.reconcile() == RequeueAfter(SETTINGS.unplaceable_retry)
    assert env.placement() is None
    assert all(w.cluster.writes() == [] for w in env.workers.values())
    (event,) = env.events.recorded
    assert (event.type, event.reason) == ("Warning", "PodAdmissionRefused")
    assert f"ServiceAccount trainer does not exist in namespace {NAMESPACE}" in event.message
    env.manager.pod_admission = None  # the ServiceAccount is created on the manager
    assert await env.reconcile() == CREATED_LOOK
    assert env.placement() == "w2"


async def test_a_template_edit_of_a_suspended_job_is_admitted_before_its_mirror_takes_it(
    env: Env,
) -> None:
    submitted = env.submit(job())
    submitted["metadata"]["generation"] = 1
    assert await env.reconcile() == CREATED_LOOK
    env.catch_up()
    edited = copy.deepcopy(env.stored())
    assert edited is not None
    edited["spec"]["suspend"] = True
    edited["metadata"]["generation"] = 2
    env.submit(edited)
    await env.reconcile()  # the mirror is suspended too
    env.catch_up()
    mirror_now = env.mirror_on("w2")
    assert mirror_now is not None and mirror_now["spec"]["suspend"] is True
    probes = len(env.manager.dry_runs())

    edited = copy.deepcopy(env.stored())
    assert edited is not None
    edited["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "b"}
    edited["metadata"]["generation"] = 3
    env.submit(edited)
    env.manager.pod_admission = PRIVILEGED_REFUSAL
    assert await env.reconcile() == RequeueAfter(SETTINGS.unplaceable_retry)
    assert len(env.manager.dry_runs()) == probes + 1  # generation 3 was asked about
    mirror_now = env.mirror_on("w2")
    assert mirror_now is not None
    assert "nodeSelector" not in mirror_now["spec"]["template"]["spec"]
    assert env.events.recorded[-1].reason == "PodSecurityViolation"

    env.manager.pod_admission = None  # fixed (or the namespace relabelled)
    env.catch_up()
    assert back_for_its_record(await env.reconcile())
    mirror_now = env.mirror_on("w2")
    assert mirror_now is not None
    assert mirror_now["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "b"}


async def test_jobs_alike_are_asked_about_once_until_their_namespace_changes_or_time_passes(
    env: Env,
) -> None:
    now = [100.0]
    env.admission._monotonic = lambda: now[0]

    async def place(name: str) -> None:
        obj = job()
        obj["metadata"]["name"] = name
        obj["metadata"]["uid"] = f"uid-{name}"
        env.submit(obj)
        assert (
            await env.reconciler.reconcile(WorkloadKey(JOB.name, f"{NAMESPACE}/{name}"))
            == CREATED_LOOK
        )

    await place("first")
    await place("alike")  # the same pods, in the same namespace: allowed already
    assert len(env.manager.dry_runs()) == 1
    env.reconciler.policy_changed(NAMESPACE, {})  # e.g. relabelled for Pod Security
    await place("after-relabel")
    assert len(env.manager.dry_runs()) == 2
    now[0] += 10.0  # a LimitRange or a webhook may have come meanwhile
    await place("later")
    assert len(env.manager.dry_runs()) == 3
    other = job()
    other["metadata"].update(name="other-pods", uid="uid-other")
    other["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:other"
    env.submit(other)
    await env.reconciler.reconcile(WorkloadKey(JOB.name, f"{NAMESPACE}/other-pods"))
    assert len(env.manager.dry_runs()) == 4


async def test_jobs_alike_are_remembered_by_a_digest_in_a_bounded_cache(env: Env) -> None:
    # A tenant's pods may be large: the cache holds their SHA-256, never their bytes, and
    # at most _ALIKE_REMEMBERED of them.
    big = job()
    big["metadata"].update(name="big", uid="uid-big")
    big["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "X", "value": "<" * 200_000}
    ]
    env.submit(big)
    await env.reconciler.reconcile(WorkloadKey(JOB.name, f"{NAMESPACE}/big"))
    remembered = env.admission._allowed_alike
    assert remembered and all(len(digest) == 32 for _, digest in remembered)
    first = next(iter(remembered))
    for number in range(admission_module._ALIKE_REMEMBERED + 5):
        env.admission._remember_alike((NAMESPACE, probe_digest({"n": number})))
    assert len(remembered) == admission_module._ALIKE_REMEMBERED
    assert first not in remembered  # the oldest went first
    # Key order does not matter to the digest: the canonical JSON is sorted.
    assert probe_digest({"a": 1, "b": 2}) == probe_digest({"b": 2, "a": 1})


async def test_a_refusal_is_not_remembered_for_jobs_alike(env: Env) -> None:
    env.manager.pod_admission = PRIVILEGED_REFUSAL
    env.submit(job())
    await env.reconcile()
    await env.reconcile()
    assert len(env.manager.dry_runs()) == 2


async def test_a_passing_status_step_waits_for_the_next_one_at_most_the_batch_period(
    env: Env,
) -> None:
    now = [50.0]
    env.memory._monotonic = lambda: now[0]
    env.reconciler._settings = dataclasses.replace(SETTINGS, status_batch_period=1.0)
    env.submit(job())
    assert await env.reconcile() == CREATED_LOOK
    created = env.mirror_on("w2")
    assert created is not None
    created["status"] = {"startTime": RUNNING["startTime"], "active": 1, "ready": 0}
    env.catch_up()
    assert back_for_its_record(await env.reconcile())  # the start is copied at once
    created["status"] = dict(RUNNING)  # only ready moved
    env.catch_up()
    assert await env.reconcile() == RequeueAfter(1.0)
    now[0] += 0.4
    answer = await env.reconcile()  # waited since the first look
    assert isinstance(answer, RequeueAfter) and answer.seconds == pytest.approx(0.6)
    assert (env.stored() or {})["status"]["ready"] == 0
    now[0] += 0.6
    assert back_for_its_record(await env.reconcile())
    assert (env.stored() or {})["status"]["ready"] == 1


async def test_a_created_mirror_is_recorded_off_the_dispatch_path_and_pinned_meanwhile(
    env: Env,
) -> None:
    """The dispatch writes the placement and the mirror, not the record: the create's
    answer names the mirror followed until the record is written, once the mirror has
    run RECORD_AFTER seconds, in a decision that writes nothing else to the object."""
    now = [100.0]
    env.memory._monotonic = lambda: now[0]
    env.submit(job())
    assert await env.reconcile() == CREATED_LOOK
    created = env.mirror_on("w2")
    assert created is not None
    annotations = (env.stored() or {})["metadata"].get("annotations") or {}
    assert MIRRORS_ANNOTATION not in annotations  # not on the dispatch path
    created["status"] = dict(RUNNING)
    env.catch_up()
    outcome = await env.reconcile()
    assert outcome == RequeueAfter(RECORD_AFTER, Lane.BACKGROUND)
    assert (env.stored() or {})["status"]["active"] == 1  # followed, unrecorded

    # A worker that swaps the mirror for its own before the record: not followed.
    forged = copy.deepcopy(created)
    forged["metadata"]["uid"] = "forged-uid"
    forged["status"] = dict(COMPLETE)
    env.workers["w2"].cluster.put("jobs", forged)
    env.catch_up()
    await env.reconcile()
    stored = env.stored()
    assert stored is not None and not JOB.is_finished(stored)
    env.workers["w2"].cluster.put("jobs", created)
    env.catch_up()

    now[0] += RECORD_AFTER
    assert await env.reconcile() == DONE
    recorded = (env.stored() or {})["metadata"]["annotations"][MIRRORS_ANNOTATION]
    assert recorded == f"1:w2:{created['metadata']['uid']}"
    env.catch_up()
    assert await env.reconcile() == DONE  # recorded: nothing more to come back for
    assert env.memory.unrecorded("w2", KEY) is None


@pytest.fixture
async def even_env() -> AsyncIterator[Env]:
    """Two workers with the same load."""
    async for value in make_env(*workers("w1", "w2")):
        yield value


async def test_a_burst_asked_about_at_once_still_spreads_over_the_workers(
    even_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every new Job waits on its admission probe, then places: the loads each one
    places by must include the placements the others made meanwhile."""
    env = even_env
    probe = env.admission.verdict

    async def slow_probe(kind: Any, obj: JsonObj) -> Any:
        await asyncio.sleep(0.01)  # every probe is in flight before any answers
        return await probe(kind, obj)

    monkeypatch.setattr(env.admission, "verdict", slow_probe)
    names = [f"burst-{i}" for i in range(4)]
    for name in names:
        obj = job()
        obj["metadata"]["name"] = name
        obj["metadata"]["uid"] = f"uid-{name}"
        env.manager.put("jobs", obj)
    env.informer.refresh(env.manager, JOB)
    keys = [WorkloadKey(JOB.name, f"{NAMESPACE}/{name}") for name in names]
    await asyncio.gather(*(env.reconciler.reconcile(key) for key in keys))
    placed = [
        (env.manager.get("jobs", key.key) or {})["metadata"]["annotations"][CLUSTER_ANNOTATION]
        for key in keys
    ]
    assert sorted(placed) == ["w1", "w1", "w2", "w2"], placed


async def test_an_admitted_generation_is_not_asked_about_again(env: Env) -> None:
    for worker in env.workers.values():
        worker.connected = False  # admitted, but nowhere to go: retried later
    env.submit(job())
    assert await env.reconcile() == HELD_RETRY
    assert await env.reconcile() == HELD_RETRY
    assert len(env.manager.dry_runs()) == 1


async def test_a_manager_that_does_not_answer_the_probe_is_retried(env: Env) -> None:
    env.manager.fail("POST", "/pods", 503, "ServiceUnavailable")
    env.submit(job())
    with pytest.raises(ApiError):
        await env.reconcile()
    assert env.placement() is None
    assert await env.reconcile() == CREATED_LOOK
    assert env.placement() == "w2"


# -- fresh reads ----------------------------------------------------------------------


async def test_read_fresh_rereads_the_object_and_decides_again(env: Env) -> None:
    env.submit(job(placed="w1"))
    assert await env.reconcile() == CREATED_LOOK
    assert ("GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{NAME}") in [
        (m, p) for m, p, _ in env.manager.requests
    ]
    assert env.mirror_on("w1") is not None  # the fresh object was unfinished: created


async def test_a_mirror_is_not_resurrected_when_the_fresh_object_is_finished(env: Env) -> None:
    env.submit(job(placed="w1", status=RUNNING))
    finished = env.stored()
    assert finished is not None
    finished["status"] = dict(COMPLETE)  # the cache has not seen the final status yet
    assert await env.reconcile() == DONE
    assert env.mirror_on("w1") is None
    assert env.events.recorded == []


async def test_a_fresh_read_finding_the_object_gone_creates_nothing(env: Env) -> None:
    env.submit(job(placed="w1"))
    env.manager.objects.clear()  # deleted; the cache still has it
    assert await env.reconcile() == DONE
    assert env.mirror_on("w1") is None and env.mirror_on("w2") is None
    assert env.events.recorded == []


async def test_a_failing_fresh_read_raises(env: Env) -> None:
    env.submit(job(placed="w1"))
    env.manager.fail("GET", f"/jobs/{NAME}", 500, "InternalError")
    with pytest.raises(ApiError):
        await env.reconcile()


# -- collisions and the probe -----------------------------------------------------------


async def test_collided_create_reads_the_namesake_then_probes_and_moves() -> None:
    w1, w2, w3, w4, w5 = workers("w1", "w2", "w3", "w4", "w5")
    w2.active, w4.active = 3, 1
    w5.connected = False
    async for env in make_env(w1, w2, w3, w4, w5):
        env.submit(job(placed="w1"))
        namesake = {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"x": "y"}}}
        w1.cluster.put("jobs", namesake)
        w3.cluster.put("jobs", dict(namesake, metadata=dict(namesake["metadata"])))
        w4.cluster.fail("GET", f"/jobs/{NAME}", 0, "")  # unreachable for the probe
        assert await env.reconcile() == DONE
        # Placed away from both holders of a namesake; the unreachable one is not
        # known to hold one, and w5 is not connected.
        assert env.placement() == "w4"
        assert env.events.reasons() == ["NameCollision"]
        assert w1.cluster.get("jobs", KEY.key) == namesake  # never touched
        assert [m for m, _, _ in w1.cluster.writes()] == ["POST"]
        for worker in (w2, w3, w4):
            assert ("GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{NAME}") in [
                (m, p) for m, p, _ in worker.cluster.requests
            ]
        assert w5.cluster.requests == []


async def test_a_collision_right_after_placing_moves_within_the_same_reconcile() -> None:
    w1, w2 = workers("w1", "w2")
    w2.active = 5
    async for env in make_env(w1, w2):
        env.submit(job())
        w1.cluster.put("jobs", {"metadata": {"name": NAME, "namespace": NAMESPACE}})
        # The cache will not show the placement written during this reconcile.
        assert await env.reconcile() == DONE
        assert env.placement() == "w2"
        assert env.events.reasons() == ["NameCollision"]
        assert env.mirror_on("w2") is None  # created once the cache shows the move
        env.catch_up()
        assert await env.reconcile() == CREATED_LOOK
        assert env.mirror_on("w2") is not None


async def test_a_collision_with_our_own_unseen_mirror_is_no_collision(env: Env) -> None:
    env.submit(job(placed="w1"))
    ours = env.workers["w1"].cluster.put("jobs", mirror(job(), status=RUNNING))
    assert await env.reconcile() == DONE
    assert env.events.reasons() == []
    assert env.mirror_on("w1") == ours
    # Unrecorded (a restart between its create and its record): adopted, once, ...
    stored = env.stored()
    assert stored is not None
    assert stored["metadata"]["annotations"][MIRRORS_ANNOTATION] == "1:w1:m-1"
    # ... then followed (once the caches show the record and the mirror).
    env.informer.refresh(env.manager, JOB)
    env.workers["w1"].cache[KEY] = ours
    assert await env.reconcile() == DONE
    stored = env.stored()
    assert stored is not None and stored["status"]["active"] == 1  # its status followed


async def test_a_collision_whose_read_fails_raises(env: Env) -> None:
    env.submit(job(placed="w1"))
    env.workers["w1"].cluster.put("jobs", {"metadata": {"name": NAME, "namespace": NAMESPACE}})
    env.workers["w1"].cluster.fail("GET", f"/jobs/{NAME}", 500, "InternalError")
    with pytest.raises(ApiError):
        await env.reconcile()


async def test_reading_on_a_worker_that_went_away_finds_nothing(env: Env) -> None:
    assert await env.reconciler._read_remote(JOB, KEY, "gone") is None


# -- the snapshot -----------------------------------------------------------------------


async def test_snapshot_reflects_caches_expectations_and_reservations(env: Env) -> None:
    w1, w2 = env.workers["w1"], env.workers["w2"]
    w1.labels = {"zone": "a"}
    w1.cordoned = True
    w2.synced_kinds = {"JobSet.v1alpha2.jobset.x-k8s.io"}
    obj = env.submit(job(placed="w1"))
    w1.cache[KEY] = mirror(obj, uid="m-1")
    w2.cache[KEY] = mirror(job(uid="uid-old"), uid="m-old")
    memory = env.memory
    memory.created.expect(("w1", KEY, UID))
    memory.created.expect(("w2", KEY, UID))
    memory.deleted.expect("m-old")
    memory.reservations.reserve("w2", WorkloadKey(JOB.name, "team-a/other"))
    runtime = KindRuntime(JOB, env.informer)  # type: ignore[arg-type]

    # A snapshot only reads: the create the cache shows is still expected ...
    read_only = env.reconciler.snapshot(KEY, runtime)
    assert read_only.worker("w1").create_pending  # type: ignore[union-attr]
    assert memory.created.pending(("w1", KEY, UID))
    # ... until the step that forgets what the caches confirm, run before each look.
    s = env.reconciler._look(KEY, runtime)
    assert s.obj == env.informer.get(KEY.key) and not s.fresh and not s.probed
    assert s.now == NOW and s.key == KEY and s.kind is JOB
    one, two = s.workers
    assert (one.name, one.cordoned, dict(one.labels), one.load) == ("w1", True, {"zone": "a"}, 2)
    assert (two.synced, two.load) == (False, 1)
    # The cache shows the created mirror on w1: that expectation is met.
    assert not one.create_pending and not memory.created.pending(("w1", KEY, UID))
    assert two.create_pending
    assert s.deleting == frozenset({"m-old"})
    assert not one.read_done and one.seen == one.mirror


async def test_snapshot_like_an_earlier_one_keeps_its_fresh_reads(env: Env) -> None:
    env.submit(job())
    runtime = KindRuntime(JOB, env.informer)  # type: ignore[arg-type]
    first = env.reconciler.snapshot(KEY, runtime)
    fresh_obj = job(placed="w2")
    read = {"metadata": {"name": NAME}}
    earlier = Snapshot(
        key=first.key,
        kind=first.kind,
        settings=first.settings,
        obj=fresh_obj,
        workers=tuple(
            w if w.name != "w1" else type(w)(**{**_fields(w), "read": read, "read_done": True})
            for w in first.workers
        ),
        now=first.now,
        fresh=True,
        probed=True,
    )
    again = env.reconciler.snapshot(KEY, runtime, like=earlier)
    assert again.obj == fresh_obj and again.fresh and again.probed
    w1 = again.worker("w1")
    assert w1 is not None and w1.read == read and w1.read_done
    w2 = again.worker("w2")
    assert w2 is not None and not w2.read_done


def _fields(state: Any) -> dict[str, Any]:
    return {name: getattr(state, name) for name in state.__slots__}


def test_utc_now_is_rfc3339() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_now())


async def test_an_outcome_still_asking_for_reads_is_a_backoff(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unsettled(key: WorkloadKey, runtime: KindRuntime) -> ReadFresh:
        return ReadFresh(probe=True)

    monkeypatch.setattr(env.reconciler, "_settle", unsettled)
    assert isinstance(await env.reconcile(), Retry)
