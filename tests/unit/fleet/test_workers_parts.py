"""The worker pool's parts one at a time: the lost clock, the status clock and writer,
the capacity feed and its debounced calls, the connection's identity."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.fleet.workers import capacity_feed as capacity_module
from jobrelay.fleet.workers.capacity_feed import CapacityCalls, CapacityFeed
from jobrelay.fleet.workers.connection import Connector, client_from_kubeconfig
from jobrelay.fleet.workers.liveness import probe
from jobrelay.fleet.workers.liveness_rules import LostClock
from jobrelay.fleet.workers.record import Worker, WorkerRecord
from jobrelay.fleet.workers.status_rules import (
    StatusClock,
    connected_condition,
    replacing,
)
from jobrelay.fleet.workers.status_writer import StatusWriter
from jobrelay.kinds.job.pod_labels import JOB_NAME_LABEL, JOB_UID_LABEL
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import InformerEvent
from jobrelay.placement.slim_objects import slim_node, slim_pod
from jobrelay.vocabulary.timestamps import rfc3339

NOW = 10_000.0
SILENT = {"status": {"conditions": [{"type": "Connected", "status": "False",
                                     "lastTransitionTime": "1970-01-01T02:00:00Z"}]}}  # fmt: skip


# -- the lost clock --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clock", "connected", "failing", "registration", "expected"),
    [
        (LostClock(900.0), True, False, {}, None),
        (LostClock(900.0, down_since=NOW - 100), True, True, {}, None),
        (LostClock(900.0), False, False, {}, 900.0),  # connecting: not timed
        (LostClock(900.0), False, True, {}, 900.0),  # failing, counted from now
        (LostClock(900.0), False, True, SILENT, 900.0 - (NOW - 7200.0)),  # from the stored
        (LostClock(900.0, down_since=NOW - 100), False, False, SILENT, 800.0),
        (LostClock(900.0, down_since=NOW - 1000), False, True, {}, -100.0),
    ],
)  # fmt: skip
def test_lost_in_reads_the_clock_and_changes_nothing(
    clock: LostClock, connected: bool, failing: bool, registration: Any, expected: float | None
) -> None:
    before = (clock.down_since, clock.declared_lost)
    got = clock.lost_in(connected=connected, failing=failing, registration=registration, now=NOW)
    assert got == expected
    assert (clock.down_since, clock.declared_lost) == before


@pytest.mark.parametrize(
    ("down_since", "connected", "failing", "registration", "after"),
    [
        (None, True, False, {}, None),
        (NOW - 5, True, False, {}, None),  # back: stopped
        (None, False, False, {}, None),  # connecting: not started
        (None, False, True, {}, NOW),
        (None, False, True, SILENT, 7200.0),
        (NOW - 5, False, True, SILENT, NOW - 5),  # already running: kept
    ],
)
def test_observe_starts_and_stops_the_clock(
    down_since: float | None, connected: bool, failing: bool, registration: Any, after: float | None
) -> None:
    clock = LostClock(900.0, down_since=down_since)
    clock.observe(connected=connected, failing=failing, registration=registration, now=NOW)
    assert clock.down_since == after


def test_follow_declares_lost_once_and_back_once() -> None:
    clock = LostClock(900.0, down_since=NOW - 1000)
    assert clock.lost_time() is None
    assert clock.follow(connected=False, failing=True, registration={}, now=NOW) is True
    assert clock.lost_time() == NOW - 1000 + 900.0
    assert clock.follow(connected=False, failing=True, registration={}, now=NOW) is None
    assert clock.follow(connected=True, failing=False, registration={}, now=NOW) is False
    assert clock.down_since is None and clock.lost_time() is None
    clock.failed_at(NOW)
    clock.failed_at(NOW + 5)
    assert clock.down_since == NOW
    clock.back()
    assert clock.down_since is None


# -- what the status says --------------------------------------------------------------


def test_capacity_is_written_when_it_changed_at_most_once_an_interval() -> None:
    clock = StatusClock(10.0)
    assert clock.due({"nodes": 1}, NOW)
    clock.written({"nodes": 1}, NOW)
    assert not clock.due({"nodes": 1}, NOW + 100)  # unchanged
    assert not clock.due({"nodes": 2}, NOW + 5)  # too soon
    assert clock.due({"nodes": 2}, NOW + 10)


def test_replacing_nulls_what_is_gone_at_every_depth() -> None:
    old = {"nodes": 2, "allocatable": {"cpu": "4", "nvidia.com/gpu": "1"}, "gone": {"a": 1}}
    new = {"nodes": 1, "allocatable": {"cpu": "2"}}
    assert replacing(old, new) == {
        "nodes": 1,
        "allocatable": {"cpu": "2", "nvidia.com/gpu": None},
        "gone": None,
    }
    assert replacing(None, new) == new
    assert replacing("garbage", {"a": {"b": 1}}) == {"a": {"b": 1}}


def test_rfc3339_and_the_stored_condition() -> None:
    assert rfc3339(1767225600.0) == "2026-01-01T00:00:00Z"
    assert connected_condition(SILENT) == SILENT["status"]["conditions"][0]
    assert connected_condition({"status": {"conditions": [{"type": "Other"}]}}) is None
    assert connected_condition({}) is None


class Manager:
    """The manager's status subresource, answering each PATCH with ``answer``."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.answer = (200, {})

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.patches.append(msgspec.json.decode(request.content))
        code, body = self.answer
        return httpx2.Response(code, content=msgspec.json.encode(body))

    def client(self) -> ApiClient:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self), base_url="https://m")
        return ApiClient(http, cluster="manager", options=ApiOptions(request_timeout=1.0))


@pytest.fixture
async def manager() -> AsyncIterator[tuple[Manager, ApiClient]]:
    fake = Manager()
    client = fake.client()
    yield fake, client
    await client.aclose()


def status_status(code: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": reason,
    }


async def test_the_status_writer_writes_on_change_and_says_what_it_could_not(
    manager: tuple[Manager, ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    fake, client = manager
    writer = StatusWriter(client, origin="hq", status_interval=10.0, write_fence=None)
    record = WorkerRecord("w", LostClock(900.0, down_since=1767225600.0, declared_lost=True))
    registration = {"metadata": {"name": "w", "generation": 3}, **SILENT}
    down = {"connected": False, "reason": "Timeout", "message": "t"}
    await writer.write(record, registration, **down)  # type: ignore[arg-type]
    [patch] = fake.patches
    status = patch["status"]
    assert status["lostTime"] == "2026-01-01T00:15:00Z"
    assert status["observedGeneration"] == 3 and status["origin"] == "hq"
    # The condition stayed False: its transition time is the stored one.
    assert status["conditions"][0]["lastTransitionTime"] == "1970-01-01T02:00:00Z"
    assert "activeMirrors" not in status and "lastContactTime" not in status
    await writer.write(record, registration, **down)  # type: ignore[arg-type]
    assert len(fake.patches) == 1  # nothing changed: nothing written
    # A refused write is said and not remembered (tried again next time); a
    # WorkerCluster deleted meanwhile is no news.
    fake.answer = (500, status_status(500, "InternalError"))
    up = {"connected": True, "reason": "Connected", "message": "ok"}
    await writer.write(record, registration, **up)  # type: ignore[arg-type]
    assert "cannot write status" in caplog.text
    assert record.status.written is not None
    assert record.status.written.condition["status"] == "False"
    caplog.clear()
    fake.answer = (404, status_status(404, "NotFound"))
    await writer.write(record, registration, **up)  # type: ignore[arg-type]
    assert "cannot write status" not in caplog.text


# -- capacity --------------------------------------------------------------------------


class FakeInformer:
    def __init__(self, name: str, *, synced: bool = True, error: Exception | None = None) -> None:
        self.name = name
        self.has_synced = synced
        self.last_error = error
        self.objects: dict[str, dict[str, Any]] = {}
        self.stopped = False

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)

    def keys(self) -> list[str]:
        return list(self.objects)

    async def stop(self) -> None:
        self.stopped = True


def node(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "labels": {JOB_NAME_LABEL: "j", JOB_UID_LABEL: "uid-j"}},
            "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"}}  # fmt: skip


def test_a_capacity_feed_knows_nothing_until_both_lists_are_in() -> None:
    feed = CapacityFeed("w")
    assert feed.capacity() is None and feed.pods_of("team-a", "j", "uid-j") is None
    assert feed.error is None and not feed.forbidden and not feed.listed
    feed.nodes = FakeInformer("w/nodes")  # type: ignore[assignment]
    feed.pods = FakeInformer("w/pods", synced=False)  # type: ignore[assignment]
    assert feed._node_changed(InformerEvent("ADDED", "n1", None, slim_node(node("n1", "4"))))
    assert feed.capacity() is None and feed.pods_of("team-a", "j", "uid-j") is None
    feed.pods.has_synced = True  # type: ignore[union-attr]
    feed._pod_changed(InformerEvent("ADDED", "team-a/p", None, slim_pod(pod("p"))))
    capacity = feed.capacity()
    assert capacity is not None and capacity.summary.columns().startswith("nodes 1/1, cpu 1/4")
    assert feed.pods_of("team-a", "j", "uid-j") is not None
    assert feed._node_changed(InformerEvent("DELETED", "n1", node("n1", "4"), None))


@pytest.mark.parametrize(
    ("error", "forbidden", "says"),
    [
        (ApiError(403, "Forbidden", 'cannot list resource "nodes"'), True, "Forbidden"),
        (ApiError(0, "Unreachable", "refused"), False, "Unreachable"),
    ],
)
def test_a_capacity_that_cannot_be_listed_says_why_once(
    error: Exception, forbidden: bool, says: str
) -> None:
    feed = CapacityFeed("w")
    feed.nodes = FakeInformer("w/nodes", synced=False, error=error)  # type: ignore[assignment]
    feed.pods = FakeInformer("w/pods")  # type: ignore[assignment]
    assert feed.forbidden is forbidden
    assert feed.error is not None and feed.error.startswith(f"cannot list w/nodes: {says}")
    assert feed.error_to_log() == feed.error
    assert feed.error_to_log() is None  # said once


async def test_capacity_calls_are_debounced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capacity_module, "CAPACITY_DEBOUNCE", 0.05)
    told: list[float] = []
    loop = asyncio.get_running_loop()
    calls = CapacityCalls()
    calls.schedule(lambda: told.append(loop.time()))
    calls.schedule(lambda: told.append(loop.time()))  # within the same window: one call
    await asyncio.sleep(0.01)
    assert len(told) == 1
    calls.schedule(lambda: told.append(loop.time()))
    await asyncio.sleep(0.01)
    assert len(told) == 1  # waits for the end of the window
    await asyncio.sleep(0.08)
    assert len(told) == 2 and told[1] - told[0] >= 0.04
    calls.schedule(lambda: told.append(loop.time()))
    calls.cancel()
    await asyncio.sleep(0.08)
    assert len(told) == 2  # cancelled with its record


# -- a worker's connection -------------------------------------------------------------


def worker_answering(handler: Any) -> Worker:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler), base_url="https://w")
    return Worker("w", ApiClient(http, cluster="w"), ("s", "k", "", "1"))


async def test_a_probe_keeps_the_version_and_when_it_answered() -> None:
    answers = [httpx2.Response(200, content=msgspec.json.encode({"gitVersion": "v1.35.4"}))]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if answers:
            return answers.pop()
        raise httpx2.ConnectError("refused", request=request)

    worker = worker_answering(handler)
    async with worker.client:
        await probe(worker, 3.0)
        assert worker.probe_error is None and worker.kubernetes_version == "v1.35.4"
        assert worker.last_contact is not None
        await probe(worker, 3.0)
        assert isinstance(worker.probe_error, ApiError)
        assert worker.kubernetes_version == "v1.35.4"  # the last known one stays
        assert not worker.connected and worker.verdict().reason == "Unreachable"


async def test_a_worker_record_is_failing_unless_it_is_still_connecting() -> None:
    worker = worker_answering(lambda request: httpx2.Response(200))
    async with worker.client:
        worker.mirrors["Job"] = FakeInformer("w/jobs", synced=False)  # type: ignore[assignment]
        record = WorkerRecord("w", LostClock(900.0), worker=worker)
        assert not record.connected and not record.failing  # listing: not timed
        worker.probe_error = TimeoutError()
        assert record.failing
        worker.probe_error = None
        worker.mirrors["Job"].has_synced = True  # type: ignore[attr-defined]
        assert record.connected and worker.listed_or_failed()
        worker.mirrors["Job"].objects["a/b"] = {"metadata": {"name": "b"}}  # type: ignore[attr-defined]
        assert [key.key for key in record.mirror_keys()] == ["a/b"]
        assert worker.mirror(("Job", "a/b")) is not None and worker.mirror(("X", "a/b")) is None
        await worker.stop_watching()
        assert worker.mirrors["Job"].stopped  # type: ignore[attr-defined]
    assert not WorkerRecord("gone", LostClock(1.0)).failing
    assert WorkerRecord("bad", LostClock(1.0), unusable=True).failing


async def test_the_identity_follows_the_secret_and_who_uses_it() -> None:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(404)))
    async with ApiClient(http, cluster="manager") as manager:
        connector = Connector(
            manager, namespace="ns", api=ApiOptions(), informer=None,  # type: ignore[arg-type]
            allow_exec_credentials=False, client_factory=client_from_kubeconfig,
        )  # fmt: skip
        spec = {"kubeconfigSecretRef": {"name": "s", "key": "k"}, "context": "c"}
        assert connector.identity(spec) == ("s", "k", "c", "")
        connector.secrets._cache["ns/s"] = {"metadata": {"name": "s", "resourceVersion": "7"}}
        assert connector.identity(spec) == ("s", "k", "c", "7")
        registrations = [
            {"metadata": {"name": "w1"}, "spec": spec},
            {"metadata": {"name": "w2"}, "spec": {"kubeconfigSecretRef": {"name": "other"}}},
            {"metadata": {"name": "w3"}},
        ]
        assert connector.using_secret("s", registrations) == ["w1"]
        await connector.stop()


async def test_users_streams_get_a_bounded_pool_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 21: a user's --all-pods -f must not fill the pool the probe and the informers
    wait in: each worker gets a second client, bounded apart, for users' streams."""
    from jobrelay.fleet import workerclusters

    async def kubeconfig(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(workerclusters, "read_kubeconfig", kubeconfig)
    built: list[tuple[ApiOptions, ApiClient]] = []

    def factory(config: Any, context: str | None, name: str, options: ApiOptions) -> ApiClient:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(404)))
        client = ApiClient(http, cluster=name, options=options)
        built.append((options, client))
        return client

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(404)))
    async with ApiClient(http, cluster="manager") as manager:
        connector = Connector(
            manager, namespace="ns", api=ApiOptions(max_connections=100),
            informer=None,  # type: ignore[arg-type]
            allow_exec_credentials=False, client_factory=factory, stream_connections=216,
        )  # fmt: skip
        client, streams = await connector.client("w1", {"kubeconfigSecretRef": {"name": "s"}})
        assert [options.max_connections for options, _ in built] == [100, 216]
        assert streams is not None and streams is not client
        worker = Worker("w1", client, ("s",), stream_client=streams)
        assert worker.streams is streams
        await worker.close_clients()
        assert client._http.is_closed and streams._http.is_closed
        await connector.stop()
