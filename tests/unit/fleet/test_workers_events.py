"""The pool hands each worker's Warning Events and mirror changes to its event sink."""

from __future__ import annotations

from typing import Any

from tests.unit.fleet.fakekube import collection_path
from tests.unit.fleet.test_workers import NAMESPACE, WIDGET, WORKER, Fleet, mirror, until

from jobrelay.fleet.workers import PoolOptions, Worker, WorkerPool
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.resources import EVENTS
from jobrelay.kube.watching import InformerEvent
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

EVENTS_PATH = collection_path(EVENTS)


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any] | None]] = []
        self.mirrors: list[tuple[str, str, str]] = []

    def worker_event(self, worker: Worker, event: InformerEvent) -> None:
        self.events.append((worker.name, event.new))

    def mirror_changed(self, worker: Worker, kind: WorkloadKind, event: InformerEvent) -> None:
        self.mirrors.append((worker.name, kind.name, event.key))


def warning(name: str, involved_namespace: str = "team-a") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": f"u-{name}",
                     "managedFields": [{"manager": "x"}]},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Widget", "name": "a",
                           "namespace": involved_namespace},
        "type": "Warning", "reason": "FailedCreate", "message": "no", "count": 1,
        "source": {"component": "widget-controller"},
    }  # fmt: skip


async def test_warning_events_and_mirror_changes_reach_the_sink() -> None:
    fleet = Fleet()
    server = fleet.server("w", mirror("a"))
    server.serve(EVENTS_PATH)
    server.put(EVENTS_PATH, warning("a.1"))
    server.put(EVENTS_PATH, warning("node.1", involved_namespace=""))  # about a Node
    sink = Sink()
    options = PoolOptions(
        namespace=NAMESPACE, controller_name=DEFAULT_CONTROLLER_NAME, origin="hq",
        sync_timeout=30.0, status_interval=0.05, health_timeout=30.0, lost_timeout=900.0,
        api=ApiOptions(connect_timeout=0.1, request_timeout=0.3),
    )  # fmt: skip
    pool = WorkerPool(
        fleet.manager.client(), [WIDGET], fleet.changed.append, options,
        client_factory=fleet.client_for, event_sink=sink,
    )  # fmt: skip
    fleet.register("w")
    try:
        await pool.start()
        worker = await until(lambda: pool.get(WORKER), what="the worker")
        assert worker.events is not None
        assert worker.events.name == "w/events [type=Warning]"
        await until(lambda: sink.events, what="the listed Event handed over")
        [(name, slim)] = sink.events  # the Node's Event is left out
        assert name == WORKER and slim is not None
        assert "managedFields" not in slim["metadata"] and "source" not in slim
        await until(lambda: sink.mirrors, what="the mirror handed over")
        assert sink.mirrors == [(WORKER, WIDGET.name, "team-a/a")]
        await until(lambda: server.open_watches(EVENTS_PATH), what="the watch open")
        server.put(EVENTS_PATH, {**warning("a.1"), "count": 2})
        await until(lambda: len(sink.events) == 2, what="the changed Event handed over")
        assert sink.events[1][1] is not None and sink.events[1][1]["count"] == 2
    finally:
        await pool.stop()
        await fleet.manager.clients[0].aclose()


def test_a_mirror_event_that_echoes_the_relays_own_write_wakes_no_key() -> None:
    from jobrelay.fleet.workers.record import _tell_key
    from jobrelay.kinds.base import WorkloadKey
    from jobrelay.kube.watching import Change

    told: list[WorkloadKey] = []
    asked: list[tuple[str, WorkloadKey]] = []

    def is_echo(worker: str, key: WorkloadKey, event: InformerEvent) -> bool:
        asked.append((worker, key))
        return event.new is not None and event.new.get("echo") is True

    echo = InformerEvent(Change.ADDED, "ns/a", None, {"echo": True})
    news = InformerEvent(Change.UPDATED, "ns/a", {"echo": True}, {"echo": False})
    _tell_key(told.append, "Job.v1.batch", "w1", is_echo, echo)
    _tell_key(told.append, "Job.v1.batch", "w1", is_echo, news)
    _tell_key(told.append, "Job.v1.batch", "w1", None, echo)  # nobody to ask: told
    key = WorkloadKey("Job.v1.batch", "ns/a")
    assert told == [key, key]
    assert asked == [("w1", key), ("w1", key)]
