"""EventRecorder over a mock transport: creation, dedupe, coalescing, failure isolation."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.events import EventRecorder

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1", "resourceVersion": "5"},
}


class EventServer:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_with: int | None = None
        self.fail_status: dict[str, Any] | None = None
        self.patch_status = 200
        self.received = asyncio.Event()
        # The next requests get no answer (a connect timeout).
        self.unanswered = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = msgspec.json.decode(request.content)
        self.requests.append((request.method, request.url.path, body))
        self.received.set()
        if self.unanswered > 0:
            self.unanswered -= 1
            raise httpx2.ConnectTimeout("connect timeout", request=request)
        if self.fail_with is not None:
            status = self.fail_status or {
                "kind": "Status",
                "code": self.fail_with,
                "reason": "InternalError",
                "message": "etcd down",
            }
            return httpx2.Response(self.fail_with, content=msgspec.json.encode(status))
        if request.method == "PATCH" and self.patch_status != 200:
            status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "gone"}
            return httpx2.Response(self.patch_status, content=msgspec.json.encode(status))
        return httpx2.Response(200, content=msgspec.json.encode(body))

    def methods(self) -> list[str]:
        return [method for method, _, _ in self.requests]


@pytest.fixture
def server() -> EventServer:
    return EventServer()


@pytest.fixture
def client(server: EventServer) -> ApiClient:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(server), base_url="https://m")
    return ApiClient(http, cluster="manager")


async def test_an_event_is_created_about_the_involved_object(
    server: EventServer, client: ApiClient
) -> None:
    async with EventRecorder(client, component="jobrelay", instance="pod-1") as recorder:
        recorder.record(JOB, "Normal", "Dispatched", "placed on worker-a")
    ((method, path, event),) = server.requests
    assert (method, path) == ("POST", "/api/v1/namespaces/team-a/events")
    assert event["involvedObject"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "5",
    }
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal",
        "Dispatched",
        "placed on worker-a",
    )
    assert event["count"] == 1
    assert event["metadata"]["name"].startswith("train.")
    assert event["source"] == {"component": "jobrelay", "host": "pod-1"}
    assert event["firstTimestamp"] == event["lastTimestamp"]


async def test_a_repeat_patches_the_count_instead_of_creating(
    server: EventServer, client: ApiClient
) -> None:
    async with EventRecorder(client) as recorder:
        recorder.record(JOB, "Warning", "WorkerLost", "worker-a unreachable")
        await _written(server, 1)
        recorder.record(JOB, "Warning", "WorkerLost", "worker-a unreachable")
        await _written(server, 2)
        recorder.record(JOB, "Warning", "WorkerLost", "worker-a unreachable")
        await _written(server, 3)
        recorder.record(JOB, "Warning", "WorkerLost", "worker-b unreachable")  # new message
    assert server.methods() == ["POST", "PATCH", "PATCH", "POST"]
    created_name = server.requests[0][2]["metadata"]["name"]
    assert server.requests[1][1].endswith(f"/events/{created_name}")
    assert [body.get("count") for _, _, body in server.requests] == [1, 2, 3, 1]


async def test_a_burst_is_folded_into_one_write(server: EventServer, client: ApiClient) -> None:
    async with EventRecorder(client) as recorder:
        for _ in range(50):
            recorder.record(JOB, "Normal", "Synced", "status copied")
    assert server.methods() == ["POST"]
    assert server.requests[0][2]["count"] == 50


async def test_a_repeat_during_the_first_write_counts_it_instead_of_duplicating() -> None:
    gate, arrived = asyncio.Event(), asyncio.Event()
    methods: list[str] = []

    async def slow_first_write(request: httpx2.Request) -> httpx2.Response:
        methods.append(request.method)
        arrived.set()
        await gate.wait()  # hold the first POST open while the repeat is recorded
        return httpx2.Response(200, content=request.content)

    http = httpx2.AsyncClient(
        transport=httpx2.MockTransport(slow_first_write), base_url="https://m"
    )
    async with EventRecorder(ApiClient(http), writers=4) as recorder:
        recorder.record(JOB, "Normal", "Synced", "x")
        await asyncio.wait_for(arrived.wait(), 2)
        recorder.record(JOB, "Normal", "Synced", "x")
        await asyncio.sleep(0.05)  # idle writers had their chance to take the repeat
        gate.set()
    assert methods == ["POST", "PATCH"]


async def test_a_record_may_stand_for_several_occurrences(
    server: EventServer, client: ApiClient
) -> None:
    async with EventRecorder(client) as recorder:
        recorder.record(JOB, "Warning", "FailedCreate", "worker-1: quota", count=3)
        await _written(server, 1)
        recorder.record(JOB, "Warning", "FailedCreate", "worker-1: quota", count=4)
    assert server.methods() == ["POST", "PATCH"]
    assert server.requests[0][2]["count"] == 3
    assert server.requests[1][2]["count"] == 7


async def test_an_expired_event_is_created_anew(server: EventServer, client: ApiClient) -> None:
    async with EventRecorder(client) as recorder:
        recorder.record(JOB, "Normal", "Synced", "x")
        await _written(server, 1)
        server.patch_status = 404
        recorder.record(JOB, "Normal", "Synced", "x")
    assert server.methods() == ["POST", "PATCH", "POST"]


async def test_outside_the_window_a_repeat_creates_a_new_event(
    server: EventServer, client: ApiClient
) -> None:
    async with EventRecorder(client, dedupe_window=0) as recorder:
        recorder.record(JOB, "Normal", "Synced", "x")
        await _written(server, 1)
        recorder.record(JOB, "Normal", "Synced", "x")
    assert server.methods() == ["POST", "POST"]


async def test_failures_are_logged_never_raised(
    server: EventServer, client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail_with = 500
    with caplog.at_level(logging.WARNING, logger="jobrelay.kube.events"):
        async with EventRecorder(client) as recorder:
            recorder.record(JOB, "Normal", "Synced", "x")
            recorder.record({"metadata": {"name": "no-kind"}}, "Normal", "Synced", "x")
    assert "cannot write event Synced" in caplog.text
    assert "lacks apiVersion" in caplog.text


async def test_an_event_the_apiserver_did_not_answer_is_sent_again(
    server: EventServer, client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.unanswered = 2
    async with EventRecorder(client, unanswered_retry_delay=0.01) as recorder:
        recorder.record(JOB, "Warning", "Refused", "x")
    assert server.methods() == ["POST", "POST", "POST"]
    # No answer three times: dropped, and said so; an answer, even a refusal, is final.
    server.requests.clear()
    server.unanswered = 3
    with caplog.at_level(logging.WARNING, logger="jobrelay.kube.events"):
        async with EventRecorder(client, unanswered_retry_delay=0.01) as recorder:
            recorder.record(JOB, "Warning", "Refused", "y")
    assert server.methods() == ["POST", "POST", "POST"]
    assert "cannot write event Refused" in caplog.text
    server.requests.clear()
    server.fail_with = 500
    async with EventRecorder(client, unanswered_retry_delay=0.01) as recorder:
        recorder.record(JOB, "Warning", "Refused", "z")
    assert server.methods() == ["POST"]


# What kube-apiserver's NamespaceLifecycle admission answers for a create there.
NAMESPACE_TERMINATING = {
    "kind": "Status",
    "code": 403,
    "reason": "Forbidden",
    "message": 'events "train.1" is forbidden: unable to create new content in namespace '
    "team-a because it is being terminated",
    "details": {
        "name": "train.1",
        "kind": "events",
        "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}],
    },
}


@pytest.mark.parametrize(
    "status",
    [
        NAMESPACE_TERMINATING,
        {**NAMESPACE_TERMINATING, "details": None},  # an apiserver that sends no causes
    ],
)
async def test_a_namespace_being_deleted_is_no_warning(
    server: EventServer,
    client: ApiClient,
    caplog: pytest.LogCaptureFixture,
    status: dict[str, Any],
) -> None:
    # Its objects and their Events go with it: nothing an operator needs to hear of.
    server.fail_with, server.fail_status = 403, status
    with caplog.at_level(logging.DEBUG, logger="jobrelay.kube.events"):
        async with EventRecorder(client) as recorder:
            recorder.record(JOB, "Normal", "Completed", "x")
    written = [r for r in caplog.records if "cannot write event Completed" in r.getMessage()]
    assert [r.levelno for r in written] == [logging.DEBUG]


async def test_other_refusals_are_warnings(
    server: EventServer, client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail_with = 403
    server.fail_status = {
        "kind": "Status",
        "code": 403,
        "reason": "Forbidden",
        "message": 'events is forbidden: User "jobrelay" cannot create resource "events"',
    }
    with caplog.at_level(logging.DEBUG, logger="jobrelay.kube.events"):
        async with EventRecorder(client) as recorder:
            recorder.record(JOB, "Normal", "Completed", "x")
    written = [r for r in caplog.records if "cannot write event Completed" in r.getMessage()]
    assert [r.levelno for r in written] == [logging.WARNING]


async def test_cluster_scoped_objects_get_events_in_default(
    server: EventServer, client: ApiClient
) -> None:
    worker = {
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": "worker-a", "uid": "w"},
    }
    async with EventRecorder(client) as recorder:
        recorder.record(worker, "Warning", "Unreachable", "x" * 5000)
    _, path, event = server.requests[0]
    assert path == "/api/v1/namespaces/default/events"
    assert "namespace" not in event["involvedObject"]
    assert len(event["message"]) == 1024


async def test_records_after_close_are_dropped(server: EventServer, client: ApiClient) -> None:
    recorder = EventRecorder(client)
    await recorder.aclose()
    recorder.record(JOB, "Normal", "Synced", "x")
    assert server.requests == []


async def test_a_full_backlog_drops_instead_of_growing(
    server: EventServer, client: ApiClient
) -> None:
    async with EventRecorder(client, max_pending=3) as recorder:
        for index in range(10):
            recorder.record(JOB, "Normal", "Step", f"step {index}")
    assert len(server.requests) == 3


async def _written(server: EventServer, count: int) -> None:
    """Wait until the writer task has sent ``count`` requests."""
    async with asyncio.timeout(2):
        while len(server.requests) < count:
            server.received.clear()
            await server.received.wait()


async def test_abandoning_drops_what_is_pending_and_writes_nothing_more(
    server: EventServer, client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = EventRecorder(client, writers=1)
    gate = asyncio.Event()
    write = client.create

    async def held(*args: Any, **kwargs: Any) -> dict[str, Any]:
        await gate.wait()  # the first write is in flight when leadership ends
        return await write(*args, **kwargs)

    client.create = held  # type: ignore[method-assign]
    recorder.record(JOB, "Normal", "Dispatched", "to worker-1")
    recorder.record(JOB, "Normal", "Completed", "done")
    await asyncio.sleep(0)
    with caplog.at_level(logging.INFO, logger="jobrelay.kube.events"):
        recorder.abandon()
    gate.set()
    for _ in range(10):  # let the cancelled writer run to its end
        await asyncio.sleep(0)
    assert server.requests == []
    assert "dropped 1 pending events" in caplog.text
    recorder.record(JOB, "Warning", "Failed", "after")  # closed: dropped quietly
    await recorder.aclose()
    assert server.requests == []
    await client.aclose()
