"""The one cache of SubjectAccessReview answers: asked once per TTL, for every caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobrelay.relayapi.access_reviews import AccessReviews
from jobrelay.relayapi.panel import Access
from jobrelay.relayapi.route_rules import User

ALICE = User("alice", ("team",))
BOB = User("bob")


class Manager:
    def __init__(self) -> None:
        self.allowed: set[tuple[str, str]] = set()
        self.asked: list[dict[str, Any]] = []

    async def review(self, body: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(body)
        spec = body["spec"]
        key = (spec["user"], spec["resourceAttributes"]["namespace"])
        return {**body, "status": {"allowed": key in self.allowed}}


async def test_an_answer_is_reused_until_it_expires_and_never_across_users() -> None:
    manager, now = Manager(), [0.0]
    reviews = AccessReviews(manager.review, ttl=10.0, clock=lambda: now[0])
    manager.allowed.add(("alice", "team-a"))
    assert reviews.known(ALICE, resource="jobs", namespace="team-a") is None
    assert await reviews.allowed(ALICE, resource="jobs", namespace="team-a")
    assert await reviews.allowed(ALICE, resource="jobs", namespace="team-a")
    assert reviews.known(ALICE, resource="jobs", namespace="team-a") is True
    assert not await reviews.allowed(BOB, resource="jobs", namespace="team-a")
    assert len(manager.asked) == 2
    manager.allowed.clear()  # revoked
    now[0] = 10.0
    assert reviews.known(ALICE, resource="jobs", namespace="team-a") is None
    assert not await reviews.allowed(ALICE, resource="jobs", namespace="team-a")
    assert len(manager.asked) == 3


async def test_the_cache_is_bounded_and_a_failed_review_is_not_remembered() -> None:
    manager = Manager()
    reviews = AccessReviews(manager.review, max_entries=3)
    for i in range(7):
        await reviews.allowed(ALICE, resource="jobs", namespace=f"ns-{i}")
    assert sum(reviews.known(ALICE, resource="jobs", namespace=f"ns-{i}") is not None
               for i in range(7)) <= 3  # fmt: skip

    async def failing(body: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the manager is away")

    broken = AccessReviews(failing)
    with pytest.raises(RuntimeError):
        await broken.allowed(ALICE, resource="jobs", namespace="x")
    assert broken.known(ALICE, resource="jobs", namespace="x") is None


async def test_a_right_revoked_reaches_a_watching_viewer_within_the_ttl() -> None:
    """The panel's Access keeps no answers of its own: once the cache's answer expires
    and the manager says no, the scope's rows are no longer shown."""
    manager, now = Manager(), [0.0]
    reviews = AccessReviews(manager.review, ttl=10.0, clock=lambda: now[0])
    manager.allowed.add(("alice", "team-a"))

    async def may_list(plural: str, namespace: str) -> bool:
        return await reviews.allowed(ALICE, verb="list", resource=plural, namespace=namespace)

    def known(plural: str, namespace: str) -> bool | None:
        return reviews.known(ALICE, verb="list", resource=plural, namespace=namespace)

    access = Access([], may_list, known)
    await access.settle({"jobs/team-a"})
    assert access.visible("jobs/team-a")
    manager.allowed.clear()
    now[0] = 5.0
    assert access.visible("jobs/team-a")  # the answer is still fresh
    now[0] = 10.0
    assert access.visible("jobs/team-a")  # expired: shown as it was while asked again
    await access.settle({"jobs/team-a"})
    assert not access.visible("jobs/team-a")
    access.close()


class SlowManager(Manager):
    """Answers only once let go: questions pile up in flight meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()

    async def review(self, body: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(body)
        await self.go.wait()
        return {**body, "status": {"allowed": False}}


async def test_a_question_in_flight_is_asked_once_for_every_caller() -> None:
    manager = SlowManager()
    reviews = AccessReviews(manager.review)
    waiting = [
        asyncio.create_task(reviews.allowed(BOB, verb="list", resource="jobs", namespace=""))
        for _ in range(200)
    ]
    other = asyncio.create_task(reviews.allowed(ALICE, verb="list", resource="jobs", namespace=""))
    for _ in range(3):  # the callers start, then the reviews they began
        await asyncio.sleep(0)
    assert len(manager.asked) == 2 and reviews.in_flight == 2
    # One caller that goes away leaves the review to the others.
    waiting[0].cancel()
    manager.go.set()
    answers = await asyncio.gather(*waiting[1:], other)
    assert answers == [False] * 200 and len(manager.asked) == 2 and reviews.asked == 2
    assert reviews.in_flight == 0
    assert reviews.known(BOB, verb="list", resource="jobs", namespace="") is False


async def test_a_failed_review_in_flight_fails_every_caller_and_is_asked_again() -> None:
    calls = []

    async def failing(body: dict[str, Any]) -> dict[str, Any]:
        calls.append(body)
        await asyncio.sleep(0)
        raise RuntimeError("the manager is away")

    reviews = AccessReviews(failing)
    found = await asyncio.gather(
        *(reviews.allowed(ALICE, resource="jobs", namespace="x") for _ in range(5)),
        return_exceptions=True,
    )
    assert all(isinstance(f, RuntimeError) for f in found) and len(calls) == 1
    with pytest.raises(RuntimeError):
        await reviews.allowed(ALICE, resource="jobs", namespace="x")
    assert len(calls) == 2


async def test_the_least_recently_used_answer_goes_first() -> None:
    manager, now = Manager(), [0.0]
    reviews = AccessReviews(manager.review, max_entries=3, clock=lambda: now[0])
    for namespace in ("a", "b", "c"):
        await reviews.allowed(ALICE, resource="jobs", namespace=namespace)
    assert reviews.known(ALICE, resource="jobs", namespace="a") is False  # used: kept
    await reviews.allowed(ALICE, resource="jobs", namespace="d")  # "b" goes, not all
    assert len(reviews) == 3
    kept = {n for n in "abcd" if reviews.known(ALICE, resource="jobs", namespace=n) is not None}
    assert kept == {"a", "c", "d"}
    now[0] = 100.0  # expired answers are dropped as they are met
    assert reviews.known(ALICE, resource="jobs", namespace="a") is None
    assert len(reviews) == 2
