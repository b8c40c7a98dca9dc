"""The RelayQueue cache: valid queues as specs, invalid ones with their reason (and a
condition saying it), status written fenced, on change only."""

from __future__ import annotations

from typing import Any

from tests.unit.admission.support import figures

from jobrelay.admission.queue_status import status_body, valid_condition
from jobrelay.admission.shares import QueueFigures
from jobrelay.fleet.relayqueues import RelayQueueCache, status_essence
from jobrelay.fleet.workers.status_rules import StatusClock
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import RELAY_QUEUES
from jobrelay.kube.watching import Change, InformerEvent


class Informer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.handlers: list[Any] = []
        self.has_synced = True

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def put(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        old, self.objects[name] = self.objects.get(name), obj
        for handler in self.handlers:
            handler(InformerEvent(Change.UPDATED if old else Change.ADDED, name, old, obj))

    def delete(self, name: str) -> None:
        old = self.objects.pop(name)
        for handler in self.handlers:
            handler(InformerEvent(Change.DELETED, name, old, None))


class Manager:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.fail: ApiError | None = None

    async def patch(self, resource: Any, name: str, body: Any, *, subresource: str) -> Any:
        assert resource is RELAY_QUEUES and subresource == "status"
        if self.fail is not None:
            raise self.fail
        self.patches.append((name, body["status"]))
        return body


class Planned:
    """The last admission plan's figures, as the runner hands them to the cache."""

    figures: dict[str, QueueFigures] = {}


def cache(leading: list[bool] | None = None) -> tuple[RelayQueueCache, Informer, Manager]:
    informer, manager, changes = Informer(), Manager(), []
    built = RelayQueueCache(
        manager,  # type: ignore[arg-type]
        may_write=(lambda: leading[0]) if leading else None,
        status_interval=0.0,
        on_change=lambda: changes.append(1),
        informer=informer,  # type: ignore[arg-type]
        figures=lambda: Planned.figures,
    )
    informer.add_handler(built._changed)
    Planned.figures = {}
    return built, informer, manager


def rq(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


async def test_valid_and_invalid_queues_are_told_apart_and_follow_their_objects() -> None:
    queues, informer, _ = cache()
    informer.put(rq("team-a", weight=2))
    informer.put(rq("team-b", weight=0))
    assert list(queues.specs()) == ["team-a"] and queues.specs()["team-a"].weight == 2
    assert queues.invalid() == {"team-b": "spec.weight 0 is not greater than 0"}
    informer.put(rq("team-b", weight=1))  # fixed by its admin
    assert sorted(queues.specs()) == ["team-a", "team-b"] and queues.invalid() == {}
    informer.delete("team-a")
    assert list(queues.specs()) == ["team-b"]


async def test_an_invalid_queue_gets_a_condition_saying_why() -> None:
    queues, informer, manager = cache()
    informer.put(rq("broken", queueingStrategy="LIFO"))
    assert await queues.write_status("broken")
    ((name, status),) = manager.patches
    (condition,) = status["conditions"]
    assert name == "broken" and condition["status"] == "False"
    assert "queueingStrategy 'LIFO'" in condition["message"]
    # Figures it may have had are removed (null in the merge patch).
    assert status["pending"] is None and status["fairShare"] is None
    assert not await queues.write_status("broken")  # nothing changed: nothing written


async def test_figures_are_written_once_per_change() -> None:
    queues, informer, manager = cache()
    informer.put(rq("team-a"))
    Planned.figures = {"team-a": figures()}
    await queues.write_all()
    await queues.write_all()
    assert len(manager.patches) == 1
    assert manager.patches[0][1]["usage"] == {"cpu": "40", "memory": "3Gi"}
    Planned.figures = {"team-a": figures(admitted=11)}
    await queues.write_all()
    assert [status["admitted"] for _, status in manager.patches] == [10, 11]


async def test_a_standby_writes_nothing_and_the_leader_writes_it_later() -> None:
    leading = [False]
    queues, informer, manager = cache(leading)
    informer.put(rq("team-a"))
    Planned.figures = {"team-a": figures()}
    assert not await queues.write_status("team-a") and manager.patches == []
    leading[0] = True
    assert await queues.write_status("team-a") and len(manager.patches) == 1


async def test_a_refused_write_is_tried_again() -> None:
    queues, informer, manager = cache()
    informer.put(rq("team-a"))
    manager.fail = ApiError(500, "InternalError", "etcd is slow")
    assert not await queues.write_status("team-a")
    manager.fail = None
    assert await queues.write_status("team-a")


async def test_an_unknown_queue_is_not_written() -> None:
    queues, _, manager = cache()
    assert not await queues.write_status("nobody") and manager.patches == []


async def test_a_restart_keeps_the_stored_figures_until_the_first_pass() -> None:
    queues, informer, manager = cache()
    stored = {"pending": 3, "admitted": 10, "fairShare": 0.25,
              "conditions": [{"type": "Valid", "status": "True", "reason": "Valid"}]}  # fmt: skip
    informer.put({**rq("team-a"), "status": stored})
    await queues.write_all()
    assert manager.patches == []  # nothing new to say: the figures stored stay
    Planned.figures = {"team-a": figures()}
    await queues.write_all()
    ((_, status),) = manager.patches
    assert status["pending"] == 3 and status["admitted"] == 10


async def test_a_new_valid_queue_gets_its_condition_before_any_figures() -> None:
    queues, informer, manager = cache()
    informer.put(rq("team-a"))
    await queues.write_all()
    ((_, status),) = manager.patches
    assert status == {"conditions": [status["conditions"][0]]}
    assert status["conditions"][0]["status"] == "True"


async def test_the_fair_share_pass_figures_are_what_the_status_shows() -> None:
    queues, informer, manager = cache()
    informer.put(rq("team-a"))
    Planned.figures = {
        "team-a": QueueFigures(
            name="team-a", weight=1.0, usage={"cpu": 4000}, demand={"cpu": 6000},
            pending=2, admitted=4, fair_share=0.5, actual_share=0.125,
        )
    }  # fmt: skip
    await queues.write_all()
    ((_, status),) = manager.patches
    assert status["usage"] == {"cpu": "4"} and status["demand"] == {"cpu": "6"}
    assert (status["fairShare"], status["actualShare"]) == (0.5, 0.125)


async def test_a_write_fenced_meanwhile_is_quiet(caplog: Any) -> None:
    from jobrelay.kube.errors import WriteFenced

    queues, informer, manager = cache()
    informer.put(rq("team-a"))
    manager.fail = WriteFenced("patch", "relayqueues")
    assert not await queues.write_status("team-a")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


NOW = "2026-11-26T17:00:00Z"
LATER = "2026-11-26T17:05:00Z"


def test_the_status_is_written_on_change_at_most_every_interval() -> None:
    clock = StatusClock(interval=5.0)
    body = status_essence(status_body(figures(), valid_condition(None, None, NOW)))
    assert clock.due(body, now=100.0)
    clock.written(body, now=100.0)
    # The same words again (a later transition time alone is no change): nothing to write.
    same = status_essence(status_body(figures(), valid_condition(None, None, LATER)))
    assert not clock.due(same, now=200.0)
    changed = status_essence(status_body(figures(pending=4), valid_condition(None, None, NOW)))
    assert not clock.due(changed, now=103.0)  # too soon: the flush writes it later
    assert clock.due(changed, now=105.0)


def test_a_restart_does_not_rewrite_a_status_already_stored() -> None:
    body = status_essence(status_body(figures(), valid_condition(None, None, NOW)))
    clock = StatusClock(interval=5.0)
    clock.adopt(body)
    assert not clock.due(body, now=0.0)
    changed = status_essence(status_body(figures(pending=4), valid_condition(None, None, NOW)))
    assert clock.due(changed, now=0.0)  # a change from what is stored is written at once
