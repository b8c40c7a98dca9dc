"""The panel: its feed (rows from caches, watches) and its routes through the handler.

The caches, the manager's reviews and the worker are fakes here; the real path (the
aggregator, SubjectAccessReviews, a browser through kubectl proxy) is
tests/e2e/test_panel_api.py and tests/e2e/test_dashboard_browser.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from tests.unit.relayapi.test_handler import (
    CONTROLLER,
    MIRROR_UID,
    ORIGIN,
    PROXY,
    Manager,
    Objects,
    Pool,
    Runtime,
    Worker,
    WorkerClient,
    _pod,
    mirror_of,
    request,
)

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.client import ListResult
from jobrelay.relayapi import panel_rules
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.httpserver import Answer, Stream
from jobrelay.relayapi.panel import Access, PanelFeed, TooManyWatches
from jobrelay.relayapi.route_rules import API_PATH, Limits


def cached(
    check: Callable[[str, str], Awaitable[bool]],
) -> tuple[Callable[[str, str], Awaitable[bool]], Callable[[str, str], bool | None]]:
    """``check`` behind a cache of its answers, as the one review cache (access_reviews.py)
    stands behind the panel's: the asking and the knowing halves of an Access."""
    answers: dict[tuple[str, str], bool] = {}

    async def ask(plural: str, namespace: str) -> bool:
        answers[(plural, namespace)] = granted = await check(plural, namespace)
        return granted

    return ask, lambda plural, namespace: answers.get((plural, namespace))


def job(
    name: str, namespace: str = "team-a", version: str = "1", **annotations: str
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "resourceVersion": version, "creationTimestamp": "2026-11-28T06:00:00Z",
                     "annotations": annotations},
        "spec": {"completions": 1},
    }  # fmt: skip


class CountingKind(JobKind):
    """A Job kind that counts how often a workload's state is worked out."""

    looked = 0

    def finish(self, obj: dict[str, Any]) -> Any:
        CountingKind.looked += 1
        return super().finish(obj)


def feed_of(
    objects: Objects, registrations: list[dict[str, Any]] | None = None, **kwargs: Any
) -> PanelFeed:
    return PanelFeed(
        {"Job.v1.batch": Runtime(CountingKind(), objects)},  # type: ignore[dict-item]
        lambda: registrations or [],
        lambda: [{"metadata": {"name": "team-a"}, "spec": {"weight": 1}, "status": {}}],
        **kwargs,
    )


async def lines(chunks: AsyncIterator[bytes], count: int) -> list[dict[str, Any]]:
    """The next ``count`` watch events (BOOKMARKs skipped)."""
    found: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        while len(found) < count:
            chunk = await anext(chunks)
            found += [json.loads(line) for line in chunk.splitlines()]
            found = [event for event in found if event["type"] != "BOOKMARK"]
    return found


def test_a_workloads_row_is_rebuilt_only_when_its_object_changed() -> None:
    objects = Objects({"team-a/a": job("a"), "team-a/b": job("b")})
    feed = feed_of(objects)
    CountingKind.looked = 0
    first = feed.rows("workloads")
    # Once for its row and once for the estimated start (issue 34), per version.
    assert CountingKind.looked == 4
    objects["team-a/b"] = job("b", version="2", **{"jobrelay.dev/cluster": "worker-1"})
    feed._estimates._at = None  # as if ESTIMATES_EVERY passed
    second = feed.rows("workloads")
    assert CountingKind.looked == 6
    assert second["jobs/team-a/a"] is first["jobs/team-a/a"]
    assert second["jobs/team-a/b"]["worker"] == "worker-1"


def test_the_fleet_counts_the_running_workloads_of_each_worker() -> None:
    running = job("a", **{"jobrelay.dev/cluster": "worker-1"})
    running["status"] = {"active": 1}
    feed = feed_of(Objects({"team-a/a": running}), [{"metadata": {"name": "worker-1"}}])
    assert feed.rows("fleet")["worker-1"]["running"] == 1
    assert feed.rows("queues")["team-a"]["weight"] == 1


async def test_a_watch_starts_with_every_row_then_sends_changes() -> None:
    objects = Objects({"team-a/a": job("a")})
    feed = feed_of(objects, interval=0.01)
    chunks = feed.watch("workloads", None)
    assert [(e["type"], e["object"]["name"]) for e in await lines(chunks, 1)] == [("ADDED", "a")]
    objects["team-a/b"] = job("b")
    objects["team-a/a"] = job("a", version="2", **{"jobrelay.dev/not-placed": "NeverFits: x"})
    events = await lines(chunks, 2)
    assert sorted((e["type"], e["object"]["name"], e["object"]["state"]) for e in events) == [
        ("ADDED", "b", "Pending"), ("MODIFIED", "a", "Held")]  # fmt: skip
    del objects["team-a/b"]
    assert [(e["type"], e["object"]["name"]) for e in await lines(chunks, 1)] == [("DELETED", "b")]
    await chunks.aclose()  # type: ignore[attr-defined]
    assert feed.watching == 0


async def test_a_watch_shows_only_the_namespaces_its_viewer_may_list() -> None:
    objects = Objects({"team-a/a": job("a"), "team-b/b": job("b", "team-b")})
    allowed = {"team-a"}

    async def may_list(plural: str, namespace: str) -> bool:
        return namespace in allowed

    feed = feed_of(objects, interval=0.01)
    access = Access([], *cached(may_list))
    await access.settle({"jobs/team-a", "jobs/team-b"})
    chunks = feed.watch("workloads", access)
    assert [e["object"]["namespace"] for e in await lines(chunks, 1)] == ["team-a"]
    # A namespace seen for the first time is asked about, and its rows follow if granted.
    allowed.add("team-c")
    objects["team-c/c"] = job("c", "team-c")
    objects["team-b/b2"] = job("b2", "team-b")
    events = await lines(chunks, 1)
    assert [(e["type"], e["object"]["key"]) for e in events] == [("ADDED", "jobs/team-c/c")]
    await chunks.aclose()  # type: ignore[attr-defined]


async def test_watches_are_bounded() -> None:
    feed = feed_of(Objects(), max_watches=1)
    first = feed.watch("fleet", None)
    with pytest.raises(TooManyWatches):
        feed.watch("queues", None)
    await anext(first)
    await first.aclose()  # type: ignore[attr-defined]
    second = feed.watch("queues", None)
    await second.aclose()  # type: ignore[attr-defined]


async def test_a_watch_that_falls_too_far_behind_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobrelay.relayapi import panel

    monkeypatch.setattr(panel, "MAX_BEHIND_BYTES", 100)
    objects = Objects({f"team-a/j{i}": job(f"j{i}") for i in range(10)})
    chunks = feed_of(objects).watch("workloads", None)
    assert [chunk async for chunk in chunks] == []


async def test_a_quiet_watch_gets_bookmarks_and_ends_after_its_lifetime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrelay.relayapi import panel

    monkeypatch.setattr(panel, "HEARTBEAT", 0.01)
    chunks = feed_of(Objects(), interval=0.01).watch("fleet", None, lifetime=0.1)
    received = [chunk async for chunk in chunks]
    assert received and set(received) == {panel_rules.BOOKMARK}


# -- through the handler ------------------------------------------------------------


class PanelManager(Manager):
    """Reviews from ``allowed`` (cluster-wide ones have namespace ""), Events by UID."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict[str, Any]] = []

    async def list(self, resource: Any, **kwargs: Any) -> ListResult:
        uid = kwargs["field_selector"].removeprefix("involvedObject.uid=")
        found = [e for e in self.events if e["involvedObject"]["uid"] == uid]
        return ListResult(items=found, resource_version="1")


class EventsWorkerClient(WorkerClient):
    async def list(self, resource: Any, **kwargs: Any) -> ListResult:
        if resource.plural == "events":
            uid = kwargs["field_selector"].removeprefix("involvedObject.uid=")
            found = [e for e in self.worker_events if e["involvedObject"]["uid"] == uid]
            return ListResult(items=found, resource_version="1")
        return await super().list(resource, **kwargs)

    worker_events: list[dict[str, Any]] = []


@pytest.fixture
def panel_api() -> tuple[RelayApi, PanelManager]:
    manager = PanelManager()
    pod = _pod("train-0-aaa", "2026-01-01T00:00:01Z")
    pod["metadata"]["uid"] = "pod-uid"
    client = EventsWorkerClient(pods=[pod])
    worker = Worker(client)  # type: ignore[arg-type]
    train = job("train", **{"jobrelay.dev/cluster": "worker-a"})
    worker.mirrors[("Job.v1.batch", "team-a/train")] = mirror_of(train, MIRROR_UID)
    pool = Pool()
    pool.by_name["worker-a"] = worker
    objects = Objects({"team-a/train": train, "team-b/other": job("other", "team-b")})
    api = RelayApi(
        manager, pool, {"Job.v1.batch": Runtime(JobKind(), objects)}, Limits(),  # type: ignore[arg-type]
        controller_name=CONTROLLER, origin=ORIGIN, front_proxy=lambda: PROXY,
    )  # fmt: skip
    manager.events = [{"type": "Normal", "reason": "Dispatched", "message": "to worker-a",
                       "involvedObject": {"kind": "Job", "name": "train", "uid": "uid-train"},
                       "lastTimestamp": "2026-11-28T06:00:01Z"}]  # fmt: skip
    client.worker_events = [
        {"type": "Normal", "reason": "Started", "message": "Started container main",
         "involvedObject": {"kind": "Pod", "name": "train-0-aaa", "uid": "pod-uid"},
         "lastTimestamp": "2026-11-28T06:00:03Z"},
        {"type": "Normal", "reason": "SuccessfulCreate", "message": "Created pod: train-0-aaa",
         "involvedObject": {"kind": "Job", "name": "train", "uid": MIRROR_UID},
         "lastTimestamp": "2026-11-28T06:00:02Z"},
    ]  # fmt: skip
    return api, manager


def status(answer: Answer | Stream) -> tuple[int, str]:
    assert isinstance(answer, Answer)
    return answer.code, json.loads(answer.body).get("message", "") if answer.body else ""


async def test_the_fleet_needs_get_workerclusters(panel_api: tuple[RelayApi, PanelManager]) -> None:
    api, manager = panel_api
    code, message = status(await api.handle(request(f"{API_PATH}/fleet")))
    assert code == 403 and 'user "alice" cannot get workerclusters' in message
    manager.allowed.add(("alice", "", "workerclusters", ""))
    api.reviews.clear()
    answer = await api.handle(request(f"{API_PATH}/fleet"))
    assert isinstance(answer, Answer) and answer.code == 200
    body = json.loads(answer.body)
    assert body["kind"] == "FleetView" and [r["name"] for r in body["items"]] == ["worker-a"]


async def test_the_queues_need_get_relayqueues(panel_api: tuple[RelayApi, PanelManager]) -> None:
    api, _ = panel_api
    code, message = status(await api.handle(request(f"{API_PATH}/queues")))
    assert code == 403 and "cannot get relayqueues" in message


async def test_workloads_are_shown_where_the_user_may_list_them(
    panel_api: tuple[RelayApi, PanelManager],
) -> None:
    api, manager = panel_api
    manager.allowed.add(("alice", "team-a", "jobs", ""))
    answer = await api.handle(request(f"{API_PATH}/workloads"))
    assert isinstance(answer, Answer)
    assert [row["key"] for row in json.loads(answer.body)["items"]] == ["jobs/team-a/train"]
    code, _ = status(await api.handle(request(f"{API_PATH}/namespaces/team-b/workloads")))
    assert code == 403
    # The same questions are not asked again at once.
    asked = len(manager.reviews)
    await api.handle(request(f"{API_PATH}/workloads"))
    assert len(manager.reviews) == asked


async def test_a_workloads_events_from_both_sides(
    panel_api: tuple[RelayApi, PanelManager],
) -> None:
    api, manager = panel_api
    path = f"{API_PATH}/namespaces/team-a/jobs/train/events"
    assert status(await api.handle(request(path)))[0] == 403
    manager.allowed.add(("alice", "team-a", "jobs", ""))
    api.reviews.clear()
    answer = await api.handle(request(path))
    assert isinstance(answer, Answer) and answer.code == 200
    rows = json.loads(answer.body)["items"]
    assert [(r["side"], r["reason"], r["object"]) for r in rows] == [
        ("manager", "Dispatched", "Job/train"),
        ("worker-a", "SuccessfulCreate", "Job/train"),
        ("worker-a", "Started", "Pod/train-0-aaa"),
    ]


async def test_the_dashboards_files(panel_api: tuple[RelayApi, PanelManager]) -> None:
    api, _ = panel_api
    page = await api.handle(request(f"{API_PATH}/dashboard/"))
    assert isinstance(page, Answer) and page.code == 200
    assert page.content_type.startswith("text/html") and b"app.js" in page.body
    assert ("content-security-policy", panel_rules.DASHBOARD_POLICY) in page.headers
    bare = await api.handle(request(f"{API_PATH}/dashboard"))
    assert isinstance(bare, Answer) and (bare.code, bare.headers) == (
        301, (("location", "dashboard/"),))  # fmt: skip
    assert status(await api.handle(request(f"{API_PATH}/dashboard/nope.js")))[0] == 404
    # Straight to the port, without the front proxy: nothing.
    assert status(await api.handle(request(f"{API_PATH}/dashboard/", cn=None)))[0] == 401


async def test_a_watched_pass_looks_only_at_the_workloads_that_changed() -> None:
    objects = Objects({f"team-a/j{i}": job(f"j{i}") for i in range(50)})
    feed = feed_of(objects, interval=0.01)
    chunks = feed.watch("workloads", None)
    assert len(await lines(chunks, 50)) == 50
    CountingKind.looked = 0
    objects["team-a/j7"] = job("j7", version="2", **{"jobrelay.dev/cluster": "worker-1"})
    [event] = await lines(chunks, 1)
    assert (event["type"], event["object"]["name"]) == ("MODIFIED", "j7")
    assert CountingKind.looked == 1
    await chunks.aclose()  # type: ignore[attr-defined]


def test_the_page_never_parses_data_as_html() -> None:
    """What a tenant writes (names, reasons, Event messages, logs) reaches the page's DOM
    as text only: no HTML parsing of strings anywhere in its script, nothing inline."""
    from importlib.resources import files

    dashboard = files("jobrelay.relayapi") / "dashboard"
    script = (dashboard / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function"):  # fmt: skip
        assert sink not in script, sink
    page = (dashboard / "index.html").read_text()
    assert "<script>" not in page and not re.search(r"\son[a-z]+\s*=", page)


async def test_a_new_viewers_rows_are_written_in_bounded_pieces_sharing_one_encoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrelay.relayapi import panel

    monkeypatch.setattr(panel, "CHUNK_BYTES", 2000)
    objects = Objects({f"team-a/j{i}": job(f"j{i}") for i in range(40)})
    feed = feed_of(objects)
    first, second = feed.watch("workloads", None), feed.watch("workloads", None)
    pieces = [await anext(first)]
    while sum(piece.count(b"\n") for piece in pieces) < 40:
        pieces.append(await anext(first))
    assert len(pieces) > 1
    longest_line = max(len(line) for piece in pieces for line in piece.splitlines(True))
    assert all(len(piece) < 2000 + longest_line for piece in pieces)
    # Both viewers got the very same encoded lines (encoded once).
    lines_of = feed._added["workloads"]
    assert len(lines_of) == 40
    assert (await anext(second)).startswith(lines_of["jobs/team-a/j0"][1])
    for chunks in (first, second):
        await chunks.aclose()  # type: ignore[attr-defined]


def test_a_workloads_queue_is_the_one_admission_chooses_and_follows_a_new_queue() -> None:
    objects = Objects({"team-a/a": job("a")})
    chosen = {"team-a": ""}
    feed = PanelFeed(
        {"Job.v1.batch": Runtime(JobKind(), objects)},  # type: ignore[dict-item]
        lambda: [], lambda: [], queue_of=lambda namespace, named: named or chosen[namespace],
    )  # fmt: skip
    assert feed.rows("workloads")["jobs/team-a/a"]["queue"] == ""
    chosen["team-a"] = "team-a-queue"  # a RelayQueue selecting the namespace is created
    assert feed.rows("workloads")["jobs/team-a/a"]["queue"] == "team-a-queue"


async def test_a_new_queue_reaches_the_watched_workloads_it_takes() -> None:
    objects = Objects({"team-a/a": job("a")})
    queues: list[dict[str, Any]] = []
    feed = PanelFeed(
        {"Job.v1.batch": Runtime(JobKind(), objects)},  # type: ignore[dict-item]
        lambda: [], lambda: queues, interval=0.01,
        queue_of=lambda namespace, named: named or ("team-a" if queues else ""),
    )  # fmt: skip
    workloads, watched_queues = feed.watch("workloads", None), feed.watch("queues", None)
    [added] = await lines(workloads, 1)
    assert added["object"]["queue"] == ""
    queues.append({"metadata": {"name": "team-a"}, "spec": {}, "status": {}})
    assert [e["type"] for e in await lines(watched_queues, 1)] == ["ADDED"]
    [moved] = await lines(workloads, 1)
    assert (moved["type"], moved["object"]["queue"]) == ("MODIFIED", "team-a")
    for chunks in (workloads, watched_queues):
        await chunks.aclose()  # type: ignore[attr-defined]


async def test_a_review_that_fails_hides_the_rows_and_is_asked_again() -> None:
    """In a watch (no one awaits the review): nothing is left for asyncio to report."""
    import gc

    answers: list[bool | Exception] = [RuntimeError("the manager is away"), True]

    async def may_list(plural: str, namespace: str) -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        access = Access([], *cached(may_list))
        assert not access.visible("jobs/team-a")
        await asyncio.sleep(0.01)  # the review fails
        gc.collect()
    finally:
        loop.set_exception_handler(before)
    assert reported == []
    assert not access.visible("jobs/team-a")  # undecided: asked again, now granted
    await asyncio.sleep(0.01)
    assert access.visible("jobs/team-a") and answers == []


async def test_a_viewers_reviews_are_asked_a_few_at_a_time() -> None:
    from jobrelay.relayapi import panel

    in_flight, most = 0, 0

    async def may_list(plural: str, namespace: str) -> bool:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return True

    access = Access([], *cached(may_list))
    await access.settle({f"jobs/team-{i}" for i in range(100)})
    assert most == panel.REVIEWS_AT_ONCE
    assert all(access.visible(f"jobs/team-{i}") for i in range(100))


EXPECTED = "jobrelay.dev/expected-duration"


def test_a_waiting_workloads_row_has_its_estimated_start() -> None:
    """Issue 34: the aggregated API's workload rows carry ``estimatedStart`` (RFC 3339, or
    null when unknown) and its basis; a running one has none."""
    container = {"name": "c", "image": "b", "resources": {"requests": {"cpu": "2"}}}
    running = job("a", **{"jobrelay.dev/cluster": "worker-1", EXPECTED: "60s"})
    running["spec"]["template"] = {"spec": {"containers": [container]}}
    running["status"] = {"active": 1, "startTime": "2026-11-28T06:00:00Z"}
    waiting = job("b", **{EXPECTED: "60s"})
    waiting["spec"]["template"] = {"spec": {"containers": [container]}}
    worker = {
        "metadata": {"name": "worker-1"}, "spec": {},
        "status": {"conditions": [{"type": "Connected", "status": "True"}],
                   "capacity": {"allocatable": {"cpu": "2"}, "requested": {"cpu": "2"}}},
    }  # fmt: skip
    feed = feed_of(Objects({"team-a/a": running, "team-a/b": waiting}), [worker])
    feed._estimates._wall = lambda: 1_795_845_610.0  # 2026-11-28T06:00:10Z
    rows = feed.rows("workloads")
    assert rows["jobs/team-a/b"]["estimatedStart"] == "2026-11-28T06:01:00Z"
    assert rows["jobs/team-a/b"]["estimateBasis"] == "declared run times of 1 running ahead"
    assert rows["jobs/team-a/a"]["estimatedStart"] is None
    assert rows["jobs/team-a/a"]["estimateBasis"] is None
