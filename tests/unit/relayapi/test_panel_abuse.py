"""The panel under abuse: a user who may list nothing is refused, watches are bounded
per user as well as in all, and a crowd's reviews are asked once (through a client
of their own). The real path is tests/e2e/test_panel_api.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.unit.relayapi.test_handler import (
    CONTROLLER,
    ORIGIN,
    PROXY,
    Manager,
    Objects,
    Pool,
    Runtime,
    request,
)
from tests.unit.relayapi.test_panel import PanelManager, feed_of, job, panel_api, status

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.httpserver import Answer, Stream
from jobrelay.relayapi.panel import TooManyWatches
from jobrelay.relayapi.route_rules import API_PATH, Limits

__all__ = ["panel_api"]  # the fixture, imported for this module's tests

WORKLOADS = f"{API_PATH}/workloads"


@pytest.mark.parametrize("watch", [{}, {"watch": "true"}])
async def test_a_user_who_may_list_nothing_is_refused_not_shown_an_empty_view(
    panel_api: tuple[RelayApi, PanelManager], watch: dict[str, str]
) -> None:
    api, manager = panel_api
    answer = await api.handle(request(WORKLOADS, user="mallory", **watch))
    code, message = status(answer)
    assert code == 403, message
    assert 'user "mallory" cannot list jobs in any namespace that has workloads' in message
    assert json.loads(answer.body)["reason"] == "Forbidden"  # type: ignore[union-attr]
    assert api.panel.watching == 0
    # Allowed in one namespace that has workloads: its rows, and nothing else.
    manager.allowed.add(("mallory", "team-b", "jobs", ""))
    api.reviews.clear()
    answer = await api.handle(request(WORKLOADS, user="mallory"))
    assert isinstance(answer, Answer) and answer.code == 200
    assert [r["key"] for r in json.loads(answer.body)["items"]] == ["jobs/team-b/other"]


async def test_a_review_that_cannot_be_made_is_503_not_403(
    panel_api: tuple[RelayApi, PanelManager],
) -> None:
    api, manager = panel_api
    scoped = 0
    original = manager.review

    async def away(resource: Any, review: dict[str, Any]) -> dict[str, Any]:
        nonlocal scoped
        if review["spec"]["resourceAttributes"]["namespace"]:
            scoped += 1
            raise RuntimeError("the manager is away")
        return await original(resource, review)

    manager.review = away  # type: ignore[method-assign]
    code, message = status(await api.handle(request(WORKLOADS, user="mallory")))
    assert (code, scoped) == (503, 2), message


def _crowd_api(manager: Manager, limits: Limits, reviewer: Manager | None = None) -> RelayApi:
    objects = Objects({f"team-{i}/j": job("j", f"team-{i}") for i in range(5)})
    return RelayApi(
        manager, Pool(), {"Job.v1.batch": Runtime(JobKind(), objects)}, limits,  # type: ignore[arg-type]
        controller_name=CONTROLLER, origin=ORIGIN, front_proxy=lambda: PROXY,
        reviewer=reviewer,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_200_watches_of_one_who_may_list_nothing_cost_one_review_per_question() -> None:
    manager, reviewer = Manager(), Manager()
    reviewer.allowed.add(("admin", "", "jobs", ""))
    api = _crowd_api(manager, Limits(), reviewer)
    answers = await asyncio.gather(
        *(api.handle(request(WORKLOADS, user="mallory", watch="true")) for _ in range(200))
    )
    assert {status(a)[0] for a in answers} == {403}
    # One cluster-wide question, one per namespace that has workloads: not 200 of each.
    assert len(reviewer.reviews) == 1 + 5
    # Every review went through the reviewer's client, none through the manager's.
    assert manager.reviews == []
    # Another user is answered at once.
    other = await api.handle(request(WORKLOADS, user="admin"))
    assert isinstance(other, Answer) and other.code == 200
    assert len(json.loads(other.body)["items"]) == 5


async def test_watches_are_bounded_per_user_as_well_as_in_all() -> None:
    manager = Manager()
    manager.allowed |= {("hog", "", "jobs", ""), ("alice", "", "jobs", "")}
    api = _crowd_api(manager, Limits(max_watches=10, max_watches_per_user=3))
    held = [await api.handle(request(WORKLOADS, user="hog", watch="true")) for _ in range(3)]
    assert all(isinstance(s, Stream) for s in held)
    code, message = status(await api.handle(request(WORKLOADS, user="hog", watch="true")))
    assert code == 429 and 'user "hog" has 3 panel watches open' in message
    alice = await api.handle(request(WORKLOADS, user="alice", watch="true"))
    assert isinstance(alice, Stream)
    assert api.panel.watching == 4 and api.panel.watching_for("hog") == 3
    # A watch the server never read from still gives its place back once closed.
    first = held[0]
    assert isinstance(first, Stream)
    await first.chunks.aclose()  # type: ignore[attr-defined]
    first.done()  # the server calls both; the place is given back once
    assert api.panel.watching_for("hog") == 2 and api.panel.watching == 3
    again = await api.handle(request(WORKLOADS, user="hog", watch="true"))
    assert isinstance(again, Stream)
    for stream in (*held[1:], alice, again):
        assert isinstance(stream, Stream)
        await stream.chunks.aclose()  # type: ignore[attr-defined]
    assert api.panel.watching == 0 and api.panel.watching_for("hog") == 0


async def test_the_overall_bound_still_holds() -> None:
    feed = feed_of(Objects(), max_watches=2, max_watches_per_user=2)
    first, second = feed.watch("fleet", None, user="a"), feed.watch("fleet", None, user="b")
    with pytest.raises(TooManyWatches, match="2 panel watches are open"):
        feed.watch("fleet", None, user="c")
    await first.aclose()
    await second.aclose()
    assert feed.watching == 0
