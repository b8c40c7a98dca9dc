"""EventRelay over a mock manager: what it records and patches, and that a standby does not."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.fleet.workerevents_relay import EventRelay
from jobrelay.fleet.workerevents_rules import SUMMARY_REASON, RelayLimits
from jobrelay.kinds import kinds_from_names
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.client import ApiClient
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.vocabulary.names import BLOCKED_ANNOTATION, ORIGIN_UID_LABEL
from jobrelay.vocabulary.outcome import Done, RequeueAfter

[JOB_KIND] = kinds_from_names(["Job.v1.batch"])
KEY = WorkloadKey(JOB_KIND.name, "ns/train")
QUOTA = 'Error creating: pods "train-x" is forbidden: exceeded quota: zero'


@dataclass
class Listed:
    has_synced: bool = True


@dataclass
class FakeWorker:
    """What EventRelay reads of a Worker: its name, Events informer, pods and mirrors."""

    name: str
    mirrors: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: Listed = field(default_factory=Listed)
    vanished: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    capacity_feed: FakePods = field(default_factory=lambda: FakePods())

    def mirror(self, key: tuple[str, str]) -> dict[str, Any] | None:
        return self.mirrors.get(key)

    @property
    def pods(self) -> FakePods:
        return self.capacity_feed


@dataclass
class FakePods:
    """The worker's pod cache (slim pods by namespace/name), listed."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    has_synced: bool = True

    def pod(self, key: str) -> dict[str, Any] | None:
        return self.pods.get(key)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.pods.get(key)


def mirror(active: int = 0, origin_uid: str | None = "j-1") -> dict[str, Any]:
    labels = {ORIGIN_UID_LABEL: origin_uid} if origin_uid is not None else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train", "namespace": "ns", "uid": "m-1", "labels": labels,
            "creationTimestamp": "2026-11-23T08:00:00Z",
        },
        "status": {"active": active} if active else {},
    }  # fmt: skip


def worker_event(uid: str, message: str = QUOTA, reason: str = "FailedCreate") -> InformerEvent:
    obj = {
        "metadata": {"name": f"train.{uid}", "namespace": "ns", "uid": uid},
        "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                           "namespace": "ns", "uid": "m-1"},
        "type": "Warning", "reason": reason, "message": message, "count": 1,
        "lastTimestamp": "2026-11-23T08:00:01Z",
    }  # fmt: skip
    return InformerEvent(Change.ADDED, f"ns/train.{uid}", None, obj)


class Manager:
    """The management apiserver: records requests; a merge patch of the Job updates the
    object the relay's cache lookup returns."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.job: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ns", "uid": "j-1", "annotations": {}},
        }  # fmt: skip
        self.changed = asyncio.Event()
        self.posted = asyncio.Event()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = msgspec.json.decode(request.content)
        self.requests.append((request.method, request.url.path, body))
        self.posted.set()
        if request.url.path == "/apis/batch/v1/namespaces/ns/jobs/train":
            precondition = body["metadata"].get("uid")
            if precondition is not None and precondition != self.job["metadata"]["uid"]:
                status = {"kind": "Status", "code": 409, "reason": "Conflict",
                          "message": "Precondition failed: UID in precondition"}  # fmt: skip
                return httpx2.Response(409, content=msgspec.json.encode(status))
            annotations = self.job["metadata"]["annotations"]
            for key, value in body["metadata"]["annotations"].items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
            self.changed.set()
        return httpx2.Response(200, content=msgspec.json.encode(body))

    def events(self) -> list[dict[str, Any]]:
        return [b for m, p, b in self.requests if m == "POST" and p.endswith("/events")]

    def counts(self) -> int:
        """Occurrences the manager's Events say, in all."""
        total: dict[str, int] = {}
        for _method, path, body in self.requests:
            if path.endswith("/events"):
                total[body["metadata"]["name"]] = body["count"]
            elif "/events/" in path:
                total[path.rsplit("/", 1)[1]] = body["count"]
        return sum(total.values())

    async def events_posted(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.events()) < count:
                self.posted.clear()
                await self.posted.wait()

    async def annotation_becomes(self, value: str | None) -> None:
        async with asyncio.timeout(5):
            while self.job["metadata"]["annotations"].get(BLOCKED_ANNOTATION) != value:
                self.changed.clear()
                await self.changed.wait()


async def test_a_storm_of_identical_events_is_one_event_with_a_count() -> None:
    manager = Manager()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job, may_write=lambda: True
        )
        worker = FakeWorker("worker-1", {KEY: mirror()})
        for n in range(1000):
            relay.worker_event(worker, worker_event(f"e{n}"))  # type: ignore[arg-type]
        await recorder.aclose()
    [created] = manager.events()
    assert (created["reason"], created["type"]) == ("FailedCreate", "Warning")
    assert created["message"] == f"worker worker-1: {QUOTA}"
    assert created["involvedObject"]["uid"] == "j-1"
    assert manager.counts() == 1000
    assert len(manager.requests) <= 10  # one create, then a few count patches


async def test_distinct_events_are_limited_then_summarised() -> None:
    manager = Manager()
    leading = [True]
    limits = RelayLimits(burst=2, per_minute=0.001, summary_interval=0.05)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job,
            may_write=lambda: leading[0], limits=limits,
        )  # fmt: skip
        counted: list[tuple[str, int, int]] = []
        relay.on_relayed = lambda *told: counted.append(told)
        worker = FakeWorker("worker-1", {KEY: mirror(active=1)})
        for n in range(50):
            relay.worker_event(worker, worker_event(f"e{n}", f"back-off {n}", "BackOff"))  # type: ignore[arg-type]
        await manager.events_posted(3)  # the summary's timer ran
        await relay.stop()
        await recorder.aclose()
    reasons = [e["reason"] for e in manager.events()]
    assert reasons == ["BackOff", "BackOff", SUMMARY_REASON]
    assert manager.events()[-1]["message"] == (
        "worker worker-1: 48 more events not shown (rate limit): BackOff 48"
    )
    # The metrics are told as much (jobrelay_worker_events_relayed/suppressed_total).
    assert sum(r for _, r, _ in counted) == 2 and sum(s for _, _, s in counted) == 48
    assert {worker for worker, _, _ in counted} == {"worker-1"}


async def test_blocked_while_failing_to_create_and_unblocked_once_pods_run() -> None:
    manager = Manager()
    leading = [True]
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job,
            may_write=lambda: leading[0],
        )  # fmt: skip
        worker = FakeWorker("worker-1", {KEY: mirror()})
        relay.start(lambda: [worker])  # type: ignore[list-item,return-value]
        relay.worker_event(worker, worker_event("e1"))  # type: ignore[arg-type]
        await manager.annotation_becomes(f"worker-1: FailedCreate: {QUOTA}")
        patches = len(manager.requests)
        relay.worker_event(worker, worker_event("e2"))  # type: ignore[arg-type]  # same words
        running = InformerEvent(Change.UPDATED, "ns/train", mirror(), mirror(active=1))
        worker.mirrors[KEY] = mirror(active=1)
        relay.mirror_changed(worker, JOB_KIND, running)  # type: ignore[arg-type]
        await manager.annotation_becomes(None)
        annotation_patches = [
            b for m, p, b in manager.requests[patches:] if p.endswith("/jobs/train")
        ]
        assert annotation_patches == [
            {"metadata": {"uid": "j-1", "annotations": {BLOCKED_ANNOTATION: None}}}
        ]
        await relay.stop()
        await recorder.aclose()


async def test_a_standby_writes_nothing() -> None:
    manager = Manager()
    leading = [False]
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job,
            may_write=lambda: leading[0],
        )  # fmt: skip
        counted: list[tuple[str, int, int]] = []
        relay.on_relayed = lambda *told: counted.append(told)
        worker = FakeWorker("worker-1", {KEY: mirror()})
        for n in range(20):
            relay.worker_event(worker, worker_event(f"e{n}", f"m{n}"))  # type: ignore[arg-type]
        assert relay.blocked.wanted(KEY) is not None  # followed, not written
        assert await relay._sync_blocked(KEY) == Done()
        for summary in relay.relay.due(float("inf")):
            relay._record(summary)
        assert manager.requests == []
        assert counted == []  # a standby's counters stay still
        # What the standby saw is not news once it leads: a relist relays nothing,
        # a new occurrence does.
        leading[0] = True
        relay.worker_event(worker, worker_event("e3", "m3"))  # type: ignore[arg-type]
        again = worker_event("e3", "m3")
        assert again.new is not None
        again.new["count"] = 2
        relay.worker_event(worker, again)  # type: ignore[arg-type]
        await relay.stop()
        await recorder.aclose()
    [created] = manager.events()
    assert (created["message"], created["count"]) == ("worker worker-1: m3", 1)


async def test_a_stale_annotation_is_removed_only_once_the_workers_events_have_listed() -> None:
    # After a restart: the annotation is there, the mirror runs; but while a worker's
    # Events list, a FailedCreate that keeps it blocked may still come.
    manager = Manager()
    manager.job["metadata"]["annotations"][BLOCKED_ANNOTATION] = "worker-1: FailedCreate: x"
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job, may_write=lambda: True
        )
        worker = FakeWorker("worker-1", {KEY: mirror(active=1)}, events=Listed(False))
        relay._workers = lambda: [worker]  # type: ignore[assignment,list-item,return-value]
        assert await relay._sync_blocked(KEY) == RequeueAfter(1.0)
        assert manager.requests == []
        worker.events.has_synced = True
        assert await relay._sync_blocked(KEY) == Done()
        assert BLOCKED_ANNOTATION not in manager.job["metadata"]["annotations"]
        await recorder.aclose()


async def test_events_of_a_mirror_just_deleted_are_still_relayed() -> None:
    manager = Manager()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job, may_write=lambda: True
        )
        worker = FakeWorker("worker-1", vanished={KEY: mirror()})
        limit = worker_event(
            "e1", "Job has reached the specified backoff limit", "BackoffLimitExceeded"
        )
        relay.worker_event(worker, limit)  # type: ignore[arg-type]
        await recorder.aclose()
    [created] = manager.events()
    assert created["reason"] == "BackoffLimitExceeded"


# -- a worker speaks only for the management object its mirror names ------------------


def pod_event(pod: str, uid: str = "ev-p", reason: str = "FailedMount") -> InformerEvent:
    obj = {
        "metadata": {"name": f"{pod}.{uid}", "namespace": "ns", "uid": uid},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": "ns",
                           "uid": f"uid-{pod}"},
        "type": "Warning", "reason": reason, "message": "MountVolume.SetUp failed", "count": 1,
        "lastTimestamp": "2026-11-23T08:00:01Z",
    }  # fmt: skip
    return InformerEvent(Change.ADDED, f"ns/{pod}.{uid}", None, obj)


def pod(name: str, labels: dict[str, str], owner_uid: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels,
    }  # fmt: skip
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"name": "train", "uid": owner_uid, "controller": True}]
    return {"metadata": metadata}


async def relayed(worker: FakeWorker, *events: InformerEvent) -> tuple[Manager, EventRelay]:
    """What the manager got of ``events``, and the relay that saw them."""
    manager = Manager()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job, may_write=lambda: True
        )
        relay._workers = lambda: [worker]  # type: ignore[assignment,list-item,return-value]
        for event in events:
            relay.worker_event(worker, event)  # type: ignore[arg-type]
        assert await relay._sync_blocked(KEY) == Done()
        await recorder.aclose()
    return manager, relay


JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"


@pytest.mark.parametrize(
    ("made_up", "pods", "event"),
    [
        pytest.param(mirror(origin_uid=None), {}, worker_event("e1"),
                     id="a mirror naming no management UID"),
        pytest.param(mirror(origin_uid="j-other"), {}, worker_event("e1"),
                     id="a mirror naming another object's UID"),
        pytest.param(mirror(), {"ns/impostor": pod("impostor", {JOB_NAME: "train"})},
                     pod_event("impostor"), id="a pod with only the owner's name label"),
        pytest.param(mirror(), {"ns/impostor": pod("impostor", {JOB_NAME: "train",
                                                                CONTROLLER_UID: "fake"})},
                     pod_event("impostor"), id="a pod with a made-up controller-uid"),
        pytest.param(mirror(), {"ns/train-x": pod("train-x", {JOB_NAME: "train"}, "fake")},
                     pod_event("train-x"), id="a pod owned by another Job named train"),
        pytest.param(mirror(), {}, pod_event("train-abcde"),
                     id="an unknown pod named like the mirror's"),
    ],
)  # fmt: skip
async def test_a_worker_cannot_speak_for_a_workload_its_mirror_does_not_name(
    made_up: dict[str, Any], pods: dict[str, dict[str, Any]], event: InformerEvent
) -> None:
    worker = FakeWorker("worker-1", {KEY: made_up}, capacity_feed=FakePods(pods))
    manager, relay = await relayed(worker, event)
    assert manager.requests == [], "no Event, no annotation"
    assert relay.blocked.wanted(KEY) is None


@pytest.mark.parametrize(
    "genuine",
    [
        pytest.param(pod("train-a", {JOB_NAME: "train"}, "m-1"), id="owner reference"),
        pytest.param(pod("train-a", {JOB_NAME: "train", CONTROLLER_UID: "m-1"}), id="uid label"),
    ],
)
async def test_a_pod_the_mirror_owns_is_relayed(genuine: dict[str, Any]) -> None:
    worker = FakeWorker(
        "worker-1", {KEY: mirror()}, capacity_feed=FakePods({"ns/train-a": genuine})
    )
    manager, _ = await relayed(worker, pod_event("train-a"))
    [created] = manager.events()
    assert created["message"] == "worker worker-1: pod train-a: MountVolume.SetUp failed"


async def test_blocked_lands_only_on_the_object_whose_uid_the_mirror_names() -> None:
    manager = Manager()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
    async with ApiClient(http, cluster="manager") as client:
        recorder = EventRecorder(client)
        relay = EventRelay(
            client, recorder, [JOB_KIND], local=lambda key: manager.job, may_write=lambda: True
        )
        relay._workers = lambda: []  # type: ignore[assignment]
        worker = FakeWorker("worker-1", {KEY: mirror()})
        relay.worker_event(worker, worker_event("e1"))  # type: ignore[arg-type]
        assert relay.blocked.wanted(KEY) is not None
        # The Job is deleted and a namesake made before the annotation is written.
        manager.job["metadata"]["uid"] = "j-2"
        assert await relay._sync_blocked(KEY) == Done()
        assert not [p for _m, p, _b in manager.requests if p.endswith("/jobs/train")]
        # Had the cache been a moment behind, the UID precondition refuses the patch.
        manager.job["metadata"]["uid"] = "j-1"
        stale = dict(manager.job, metadata={**manager.job["metadata"], "uid": "j-1"})
        manager.job["metadata"]["uid"] = "j-3"
        relay._local = lambda key: stale
        assert await relay._sync_blocked(KEY) == Done()
        assert BLOCKED_ANNOTATION not in manager.job["metadata"]["annotations"]
        await recorder.aclose()
