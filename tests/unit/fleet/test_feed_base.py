"""The lifecycle every worker feed shares (fleet/workers/feed_base.py): placement hears
of a change only once every informer has listed, once when they have, and never after a
stop; refusals say which informer failed and why; the four feeds share it as their own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx2
import pytest

from jobrelay.dependencies.copy_rules import RESOURCES
from jobrelay.fleet.workers.capacity_feed import CapacityFeed
from jobrelay.fleet.workers.claim_feed import ClaimFeed
from jobrelay.fleet.workers.dependency_feed import DependencyFeed, may_read_everywhere
from jobrelay.fleet.workers.feed_base import Apply, FeedWiring, WorkerFeed
from jobrelay.fleet.workers.hop_feed import HopFeed
from jobrelay.fleet.workers.namespace_feed import NamespaceFeed
from jobrelay.fleet.workers.record import Worker
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import Change, Informer, InformerEvent, InformerOptions
from jobrelay.placement.tracker import CapacityTracker
from jobrelay.vocabulary.names import ORIGIN_LABEL


class StandInInformer:
    """An informer that lists when the test says so."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.handlers: list[Callable[[InformerEvent], None]] = []
        self.has_synced = False
        self.last_error: Exception | None = None
        self.calls: list[str] = []
        self._listed = asyncio.Event()

    def add_handler(self, handler: Callable[[InformerEvent], None]) -> None:
        self.handlers.append(handler)

    def start(self) -> None:
        self.calls.append("start")

    async def wait_synced(self) -> None:
        await self._listed.wait()

    async def stop(self) -> None:
        self.calls.append("stop")

    def listed(self) -> None:
        self.has_synced = True
        self._listed.set()

    def event(self, key: str, new: dict[str, Any] | None) -> None:
        for handler in self.handlers:
            handler(InformerEvent(Change.UPDATED if new else Change.DELETED, key, None, new))


@dataclass
class PairFeed(WorkerFeed):
    """A fact read through two informers: news is an object that comes or goes."""

    label: ClassVar[str] = "pair"

    first: StandInInformer = field(default_factory=lambda: StandInInformer("w/first"))
    second: StandInInformer = field(default_factory=lambda: StandInInformer("w/second"))
    started: bool = False

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        self.started = True
        apply: Apply = lambda event: True  # noqa: E731
        return [(self.first, apply), (self.second, apply)]  # type: ignore[list-item]

    def informers(self) -> Sequence[Informer | None]:
        return (self.first, self.second) if self.started else (None, None)  # type: ignore[return-value]


def wiring(told: list[str]) -> FeedWiring:
    client: Any = object()
    return FeedWiring(
        client,
        InformerOptions(),
        changed=lambda: told.append("changed"),
        status_changed=lambda: told.append("status"),
    )


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_placement_hears_of_changes_once_every_informer_has_listed() -> None:
    told: list[str] = []
    feed = PairFeed("w")
    assert not feed.listed
    feed.start(wiring(told))
    assert feed.first.calls == feed.second.calls == ["start"]
    feed.first.event("a", {"x": 1})
    feed.first.listed()
    feed.second.event("b", {"x": 1})
    await settle()
    assert told == [] and not feed.listed  # the second has not listed yet
    feed.second.listed()
    await settle()
    assert told == ["changed"] and feed.listed  # once, when both have
    feed.second.event("b", None)
    assert told == ["changed", "changed"]
    await feed.stop()
    assert feed.task is None
    assert feed.first.calls == feed.second.calls == ["start", "stop"]


async def test_a_feed_stopped_before_it_listed_tells_nothing() -> None:
    told: list[str] = []
    feed = PairFeed("w")
    feed.start(wiring(told))
    await feed.stop()
    feed.first.listed()
    feed.second.listed()
    await settle()
    assert told == []


def test_refusals_name_the_informer_that_has_not_listed_and_why() -> None:
    feed = PairFeed("w", started=True)
    feed.first.last_error = ApiError(403, "Forbidden", "cannot list")
    feed.second.last_error = ApiError(0, "Unreachable", "refused")
    feed.second.has_synced = True  # listed once: its cache stands while a watch fails
    (refusal,) = feed.refusals()
    assert (refusal.informer.name, refusal.reason) == ("w/first", "Forbidden")
    assert refusal.message.endswith("cannot list")


@pytest.mark.parametrize("feed", [CapacityFeed("w"), ClaimFeed("w"), NamespaceFeed("w"),
                                  DependencyFeed("w", NamespaceFeed("w")),
                                  HopFeed("w", CapacityTracker())])  # fmt: skip
def test_every_worker_feed_shares_the_base(feed: WorkerFeed) -> None:
    assert isinstance(feed, WorkerFeed) and not feed.listed and feed.task is None
    assert all(informer is None for informer in feed.informers())


async def test_capacity_listed_tells_placement_and_the_status() -> None:
    told: list[str] = []
    feed = CapacityFeed("w")
    feed._listed(wiring(told))
    assert told == ["changed", "status"]


def _namespace(name: str, origin: str | None) -> InformerEvent:
    labels = {ORIGIN_LABEL: origin} if origin is not None else {}
    return InformerEvent(Change.ADDED, name, None, {"metadata": {"name": name, "labels": labels}})


async def test_copies_are_watched_only_where_opened_and_told_one_by_one() -> None:
    """The least-privilege credential reads copies only in namespaces opened to its origin:
    one informer per kind there once it may read there (its review says so, or the relay
    bound its role there), closed with the label; each change told, never placement's news."""
    copies: list[tuple[str, str]] = []
    readable = {"team-a"}

    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/selfsubjectaccessreviews"):
            asked = json.loads(request.content)["spec"]["resourceAttributes"]["namespace"]
            return httpx2.Response(201, json={"status": {"allowed": asked in readable}})
        return httpx2.Response(500)  # the informers' lists: never answered here

    feed = DependencyFeed("w", NamespaceFeed("w"))
    told = FeedWiring(
        ApiClient(
            httpx2.AsyncClient(transport=httpx2.MockTransport(answer), base_url="https://w"),
            cluster="w",
        ),
        InformerOptions(),
        changed=lambda: copies.append(("placement", "")),
        copy_selector="x=y",
        copy_changed=lambda kind, key: copies.append((kind, key)),
        origin="m",
    )
    assert list(feed._open(told)) == []
    feed.everywhere = False
    feed._namespace_changed(_namespace("team-a", "m"))
    feed._namespace_changed(_namespace("team-b", "m"))  # opened, not bound yet
    feed._namespace_changed(_namespace("team-c", "other-manager"))
    feed._namespace_changed(_namespace("team-d", None))
    await asyncio.gather(*feed.pending)
    assert feed.opened == {"team-a", "team-b"}
    assert sorted(feed.by_key) == [(kind, "team-a") for kind in sorted(RESOURCES)]
    assert all("in team-a" in informer.name for informer in feed.by_key.values())
    # The relay bound its role in team-b: watched too; never where not opened.
    feed.granted("team-b")
    feed.granted("team-c")
    assert sorted({namespace for _, namespace in feed.by_key}) == ["team-a", "team-b"]
    event = InformerEvent(Change.ADDED, "team-a/c", None, {"metadata": {}})
    for (_, namespace), informer in feed.by_key.items():
        if namespace == "team-a":
            for handler in informer._handlers:
                handler(event)
    assert sorted(copies) == [(kind, "team-a/c") for kind in sorted(RESOURCES)]
    # Closed (the label taken off): its informers stop.
    feed._namespace_changed(_namespace("team-a", None))
    feed._namespace_changed(_namespace("team-b", None))
    assert feed.by_key == {} and feed.opened == set()
    await feed.stop()
    await told.client.aclose()


@pytest.mark.parametrize(("allowed", "everywhere"), [(True, True), (False, False), (None, False)])
async def test_a_credential_that_may_list_copies_everywhere_keeps_one_informer_per_kind(
    allowed: bool | None, everywhere: bool
) -> None:
    """A worker admin's credential may: one cluster-wide informer per kind (fewer watches);
    a refusal or an error means the namespaced informers."""
    asked: list[str] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        if allowed is None:
            return httpx2.Response(403, json={"kind": "Status", "code": 403, "reason": "Forbidden"})
        return httpx2.Response(201, json={"status": {"allowed": allowed}})

    client = ApiClient(
        httpx2.AsyncClient(transport=httpx2.MockTransport(answer), base_url="https://w"),
        cluster="w",
    )
    assert await may_read_everywhere(client) is everywhere
    assert set(asked) == {"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"}
    assert len(asked) == 2 * len(RESOURCES)
    await client.aclose()


def test_namespaces_count_as_listed_once_the_credential_was_asked_for_too() -> None:
    feed = NamespaceFeed("w")
    informer = StandInInformer("w/namespaces")
    informer.has_synced = True
    feed.informer = informer  # type: ignore[assignment]
    assert not feed.listed
    feed.asked = True
    assert feed.listed


def test_a_worker_starts_and_stops_each_of_its_feeds_in_declared_order() -> None:
    client: Any = object()
    worker = Worker("w", client, ("s",))
    assert worker.feeds() == (
        worker.capacity_feed, worker.hop_feed, worker.namespace_feed, worker.dependency_feed,
        worker.claim_feed, worker.provisioning_feed,
    )  # fmt: skip
    # The hops feed the capacity feed's tracker.
    assert worker.hop_feed.tracker is worker.capacity_feed.tracker


def test_listed_is_asked_of_the_informers_it_has_now() -> None:
    # Listed once, it answers without asking each informer again; a feed whose informers
    # change (one opened later) asks the new ones.
    feed = PairFeed("w", started=True)
    assert not feed.listed
    feed.first.listed()
    feed.second.listed()
    assert feed.listed and feed.listed
    feed.second = StandInInformer("w/second-again")
    assert not feed.listed
    feed.second.listed()
    assert feed.listed
