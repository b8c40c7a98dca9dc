"""The runner with leader election: a warm standby that writes nothing, a leader that
reconciles, a lost lease that stops every write at the renew deadline.

Fakes: the manager's apiserver (FakeCluster, every request timed), the Lease
apiserver (FakeLeases), a management cache that lists at once, and a worker
pool without workers. Time is the event loop's, fake under looptime.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from tests.unit.controller.builders import job
from tests.unit.controller.fakes import FakeCluster, FakeInformer
from tests.unit.kube.leases import FakeLeases

from jobrelay.controller import runner
from jobrelay.controller.options import (
    DEFAULTS,
    ControllerOptions,
    LeaderElectionSettings,
)
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.fleet.relayqueues import RelayQueueCache
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.election.election_rules import LeaseRecord
from jobrelay.kube.election.elector import LeadershipLost
from jobrelay.kube.errors import WriteFenced
from jobrelay.kube.resources import EVENTS
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.vocabulary.leases import lease_name_for

JOB = JobKind()
LEASE = "example-relay"
NAMESPACE = "relay-system"
OPTIONS = ControllerOptions(
    controller_name="example.com/relay",
    origin="hq",
    concurrency=2,
    gc_interval=3600.0,
    workers=dataclasses.replace(DEFAULTS.workers, namespace=NAMESPACE),
    metrics_address="",  # never :8080 in tests
)
STAMP = "2001-01-01T00:00:00.000000Z"
KEY = WorkloadKey(JOB.name, "team-a/train")


def now() -> float:
    return asyncio.get_running_loop().time()


class ListedInformer(FakeInformer):
    """A management cache that lists its objects as soon as it starts."""

    def __init__(self, objects: dict[str, Any]) -> None:
        super().__init__(objects)
        self.handlers: list[Callable[[InformerEvent], None]] = []

    def add_handler(self, handler: Callable[[InformerEvent], None]) -> None:
        self.handlers.append(handler)

    def start(self) -> None:
        for key, obj in self.objects.items():
            for handler in self.handlers:
                handler(InformerEvent(Change.ADDED, key, None, obj))

    async def wait_synced(self) -> None:
        return None

    async def stop(self) -> None:
        return None


@dataclass
class Rig:
    controller: runner.Controller
    cluster: FakeCluster
    leases: FakeLeases
    manager_requests: list[tuple[float, str, str]]  # (loop time, method, path)
    reconciled: list[tuple[float, WorkloadKey]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.controller.run(self.stop))

    def manager_writes(self) -> list[tuple[float, str, str]]:
        return [r for r in self.manager_requests if r[1] != "GET"]

    async def until(self, predicate: Callable[[], bool], within: float = 120.0) -> None:
        async with asyncio.timeout(within):
            while True:
                if predicate():
                    return
                if self.task is not None and self.task.done():
                    self.task.result()
                    raise AssertionError("the controller stopped")
                await asyncio.sleep(0.01)


@pytest.fixture
async def rig(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Rig]:
    async def installed(*_args: Any) -> None:
        return None

    monkeypatch.setattr(runner.workerclusters, "install_crd", installed)
    monkeypatch.setattr(runner.workerclusters, "ensure_namespace", installed)
    cluster = FakeCluster("manager")
    requests: list[tuple[float, str, str]] = []

    def timed(request: httpx2.Request) -> httpx2.Response:
        requests.append((now(), request.method, request.url.path))
        return cluster(request)

    manager = ApiClient(
        httpx2.AsyncClient(transport=httpx2.MockTransport(timed), base_url="https://manager"),
        cluster="manager",
    )
    leases = FakeLeases()
    election = leases.client("election")
    controller = runner.Controller(
        manager, OPTIONS, [JOB], election_client=election, identity="me_1_aa"
    )
    controller.kinds[JOB.name] = KindRuntime(JOB, ListedInformer({KEY.key: job()}))  # type: ignore[arg-type]
    controller.namespaces = ListedInformer({})  # type: ignore[assignment]
    controller.queue_admission.informers = ()  # no PriorityClasses, no ResourceQuotas
    controller.queues = RelayQueueCache(manager, informer=ListedInformer({}))  # type: ignore[arg-type]

    async def nothing(*_args: Any) -> None:
        return None

    pool: Any = controller.pool
    pool.start, pool.wait_connected, pool.stop = nothing, nothing, nothing
    built = Rig(controller, cluster, leases, requests)
    reconcile = controller.reconciler.reconcile

    async def spy(key: WorkloadKey) -> Any:
        built.reconciled.append((now(), key))
        return await reconcile(key)

    monkeypatch.setattr(controller.reconciler, "reconcile", spy)
    yield built
    if built.task is not None and not built.task.done():
        built.task.cancel()
        await asyncio.gather(built.task, return_exceptions=True)
    await manager.aclose()
    await election.aclose()


def held_by(holder: str) -> dict[str, Any]:
    return LeaseRecord(holder, 15, STAMP, STAMP, 0).spec()


def test_the_lease_is_named_after_the_controller_in_its_namespace(rig: Rig) -> None:
    elector = rig.controller.elector
    assert elector is not None
    assert (elector.namespace, elector.name, elector.identity) == (NAMESPACE, LEASE, "me_1_aa")
    # Every write of the replica, to the manager or to a worker, passes the fence.
    assert rig.controller.pool._options.api.write_fence == rig.controller.may_write


@pytest.mark.parametrize(
    ("controller_name", "lease"),
    [
        ("jobrelay.dev/relay", "jobrelay-relay"),
        ("example.com/batch_Relay", "example-batch-relay"),
        ("relay", "relay"),
        ("Example.COM/a/b", "example-a-b"),
        ("x.io/" + "y" * 80, "x-" + "y" * 61),
        ("///", "jobrelay"),
    ],
)
def test_lease_names_are_dns_safe(controller_name: str, lease: str) -> None:
    assert lease_name_for(controller_name) == lease


def test_election_without_a_client_of_its_own_is_refused() -> None:
    client = FakeCluster("m").client()
    with pytest.raises(ValueError, match="client of its own"):
        runner.Controller(client, OPTIONS, [JOB])
    with pytest.raises(ValueError, match="client of its own"):
        runner.Controller(client, OPTIONS, [JOB], election_client=client)


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time from 0, on a loop of its own
async def test_a_standby_keeps_warm_caches_writes_nothing_then_leads_when_the_lease_is_free(
    rig: Rig,
) -> None:
    rig.leases.put(LEASE, held_by("other"), namespace=NAMESPACE)
    rig.start()
    elector = rig.controller.elector
    assert elector is not None
    await rig.until(lambda: rig.controller.synced and elector.leader == "other")
    assert rig.controller.health() == runner.Health("standby", True, "other", "me_1_aa")
    for second in range(2, 31, 2):  # "other" renews for half a minute
        await asyncio.sleep(2)
        rig.leases.put(LEASE, {**held_by("other"), "renewTime": f"{second}"}, namespace=NAMESPACE)
    # Warm: the cache queued the key. Silent: no reconcile, no write anywhere.
    assert len(rig.controller.queue) == 1
    assert rig.reconciled == [] and rig.manager_writes() == []
    assert rig.leases.writes("election") == []

    released_at = now()
    rig.leases.put(LEASE, {**held_by(""), "leaseDurationSeconds": 1}, namespace=NAMESPACE)
    await rig.until(lambda: bool(rig.reconciled))
    leading_at, key = rig.reconciled[0]
    assert key == KEY and leading_at - released_at <= 2 * 1.2
    assert rig.controller.health() == runner.Health("leader", True, "me_1_aa", "me_1_aa")
    # No worker can take it: the leader says so on the Job.
    await rig.until(lambda: [e["reason"] for e in rig.cluster.events] == ["NotPlaced"])

    rig.stop.set()
    async with asyncio.timeout(60):
        await rig.task  # type: ignore[misc]
    assert rig.leases.holder(LEASE, NAMESPACE) == ""  # released for the next replica
    release = max(r.at for r in rig.leases.writes("election"))
    assert all(at <= release for at, _, _ in rig.manager_writes())


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time from 0, on a loop of its own
async def test_a_leader_that_cannot_renew_cancels_its_reconciles_and_writes_nothing_after(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_flight: list[float] = []
    reconcile = rig.controller.reconciler.reconcile

    async def slow(key: WorkloadKey) -> Any:
        if key.key == "team-a/slow":
            try:
                await asyncio.Event().wait()  # a reconcile stuck on a silent worker
            except asyncio.CancelledError:
                in_flight.append(now())
                raise
        return await reconcile(key)

    monkeypatch.setattr(rig.controller.reconciler, "reconcile", slow)
    rig.start()
    await rig.until(lambda: bool(rig.reconciled))
    rig.controller.queue.add(WorkloadKey(JOB.name, "team-a/slow"))
    await asyncio.sleep(4.5)
    rig.leases.down = True
    with pytest.raises(LeadershipLost, match="not renewed within 10s"):
        async with asyncio.timeout(60):
            await rig.task  # type: ignore[misc]
    deadline = max(r.at for r in rig.leases.writes("election")) + 10.0
    assert in_flight == [pytest.approx(deadline)]
    assert rig.manager_writes() and all(at < deadline for at, _, _ in rig.manager_writes())
    # Whatever still tries is refused before it is sent.
    with pytest.raises(WriteFenced):
        await rig.controller.manager.create(EVENTS, {"metadata": {"name": "e", "namespace": "a"}})
    assert rig.controller.health().role == "standby"


async def test_runs_log_one_line_when_leadership_is_lost(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class Losing:
        def __init__(self, *_args: Any, **_kwargs: Any) -> None:
            pass

        async def run(self, stop: asyncio.Event) -> None:
            raise LeadershipLost("lease relay-system/example-relay not renewed within 10s (down)")

    async def kinds(*_args: Any) -> list[Any]:
        return [JOB]

    monkeypatch.setattr(runner, "Controller", Losing)
    monkeypatch.setattr(runner, "resolve_kinds", kinds)
    served = {
        "jobrelay.dev/v1alpha1": [
            {"name": "workerclusters", "kind": "WorkerCluster"},
            {"name": "relayqueues", "kind": "RelayQueue"},
        ]
    }
    manager, election = FakeCluster("m", served=served).client(), FakeLeases().client()
    with caplog.at_level(logging.INFO), pytest.raises(LeadershipLost):
        await runner.run(manager, OPTIONS, election_client=election)
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in errors] == [
        "leadership lost: lease relay-system/example-relay not renewed within 10s (down); "
        "stopped acting and exiting, so that a restart comes back as a standby"
    ]
    assert manager._http.is_closed and election._http.is_closed


async def test_health_endpoints_serve_the_role_over_http(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.controller.options = dataclasses.replace(OPTIONS, health_address="127.0.0.1:0")
    rig.leases.put(LEASE, held_by("other"), namespace=NAMESPACE)
    with caplog.at_level(logging.INFO, logger="jobrelay.controller"):
        rig.start()
        await rig.until(lambda: any("serving /healthz" in r.getMessage() for r in caplog.records))
    (record,) = [r for r in caplog.records if "serving /healthz" in r.getMessage()]
    (address,) = record.addresses  # type: ignore[attr-defined]
    elector = rig.controller.elector
    assert elector is not None
    await rig.until(lambda: rig.controller.synced and elector.leader == "other")
    async with httpx2.AsyncClient(base_url=f"http://{address}", trust_env=False) as client:
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")
    assert ready.status_code == alive.status_code == 200
    assert json.loads(ready.content) == {
        "role": "standby",
        "ready": True,
        "leader": "other",
        "identity": "me_1_aa",
    }
    rig.stop.set()
    async with asyncio.timeout(30):
        await rig.task  # type: ignore[misc]


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time from 0, on a loop of its own
async def test_the_leader_registers_the_api_and_a_clean_stop_deregisters_it_after_draining(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    done: list[str] = []

    @dataclass
    class Serving:
        bound: tuple[str, int] = ("127.0.0.1", 8443)
        self_certificate: None = None  # no --api-cert-secret

        async def close(self) -> None:
            done.append("closed")

    async def start_api(*_args: Any, **_kwargs: Any) -> Serving:
        done.append("serving")
        return Serving()

    async def register(*_args: Any) -> None:
        done.append("registering")
        try:
            await asyncio.Event().wait()  # retried until written or cancelled
        except asyncio.CancelledError:
            done.append("registration ended")
            raise

    async def deregister(*_args: Any) -> None:
        done.append(f"deregistered, {len(rig.reconciled)} reconciled")

    monkeypatch.setattr(runner.relayapi, "start_api", start_api)
    monkeypatch.setattr(runner.relayapi, "register", register)
    monkeypatch.setattr(runner.relayapi, "deregister", deregister)
    settings = dataclasses.replace(OPTIONS.api, address="127.0.0.1:0", register=True)
    rig.controller.options = dataclasses.replace(OPTIONS, api=settings)
    rig.start()
    await rig.until(lambda: bool(rig.reconciled) and "registering" in done)
    assert rig.controller.api is not None
    rig.stop.set()
    async with asyncio.timeout(60):
        await rig.task  # type: ignore[misc]
    assert done == [
        "serving", "registering", "registration ended", "deregistered, 1 reconciled", "closed"
    ]  # fmt: skip
    assert rig.controller.api is None


async def test_without_election_it_leads_alone(rig: Rig) -> None:
    alone = runner.Controller(
        rig.controller.manager,
        dataclasses.replace(OPTIONS, leader_election=LeaderElectionSettings(enabled=False)),
        [JOB],
        identity="solo_1_bb",
    )
    assert alone.elector is None and alone.may_write()
    assert alone.health() == runner.Health("leader", False, "solo_1_bb", "solo_1_bb")


async def test_a_taken_health_port_stops_the_start(rig: Rig) -> None:
    blocker = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = blocker.sockets[0].getsockname()[1]
    rig.controller.options = dataclasses.replace(OPTIONS, health_address=f"127.0.0.1:{port}")
    try:
        with pytest.raises(runner.ConfigurationError, match="cannot listen"):
            await rig.controller.run(rig.stop)
    finally:
        blocker.close()
        await blocker.wait_closed()


async def test_metrics_are_served_on_their_own_address_beside_the_probes(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.controller.options = dataclasses.replace(
        OPTIONS, health_address="127.0.0.1:0", metrics_address="127.0.0.1:0"
    )
    rig.leases.put(LEASE, held_by("other"), namespace=NAMESPACE)

    def listening(event: str) -> list[str]:
        found = [r for r in caplog.records if getattr(r, "event", None) == event]
        return list(found[0].addresses) if found else []  # type: ignore[attr-defined]

    with caplog.at_level(logging.INFO, logger="jobrelay.controller"):
        rig.start()
        await rig.until(lambda: listening("metrics-listening") and listening("health-listening"))
    (metrics,), (health,) = listening("metrics-listening"), listening("health-listening")
    assert metrics != health
    await rig.until(lambda: rig.controller.synced)
    async with httpx2.AsyncClient(base_url=f"http://{metrics}", trust_env=False) as client:
        page = (await client.get("/metrics")).text
        assert (await client.get("/readyz")).status_code == 200
    async with httpx2.AsyncClient(base_url=f"http://{health}", trust_env=False) as client:
        assert (await client.get("/metrics")).status_code == 404
    # A standby, synced; its requests to the manager counted with worker="" (the manager).
    assert "\njobrelay_leader 0.0\n" in page and "\njobrelay_ready 1.0\n" in page
    assert re.search(r'^jobrelay_apiserver_requests_total\{[^}]*worker=""', page, re.M)
    # It says it stands by: no work queue gauges (its queue fills, never drains: issue 22).
    assert "jobrelay_workqueue_" not in page
    rig.stop.set()
    async with asyncio.timeout(30):
        await rig.task  # type: ignore[misc]


@pytest.mark.parametrize(
    ("metrics", "health", "expected"),
    [
        (":8080", "", [("--metrics-address", ":8080", True, ("metrics-listening",))]),
        ("", ":8081", [("--health-address", ":8081", False, ("health-listening",))]),
        ("", "", []),
        (":8080", ":8081", [
            ("--metrics-address", ":8080", True, ("metrics-listening",)),
            ("--health-address", ":8081", False, ("health-listening",)),
        ]),
        # The same port for both: one server, which says it serves both.
        (":9000", ":9000", [
            ("--metrics-address", ":9000", True, ("metrics-listening", "health-listening")),
        ]),
        # Port 0 twice: two free ports.
        ("127.0.0.1:0", "127.0.0.1:0", [
            ("--metrics-address", "127.0.0.1:0", True, ("metrics-listening",)),
            ("--health-address", "127.0.0.1:0", False, ("health-listening",)),
        ]),
    ],
)  # fmt: skip
def test_which_servers_listen_where(
    metrics: str, health: str, expected: list[runner.Listener]
) -> None:
    assert runner.listeners(metrics, health) == expected
