"""The worker pool across a rotated kubeconfig Secret, against in-memory apiservers.

The safety property: while a worker reconnects, its mirror caches are never
seen empty (an empty cache would make its mirrors look vanished and its
workloads look placeable elsewhere). The old connection serves until the new
caches have listed; new credentials the worker refuses, or an unusable Secret,
take effect at once, so that its status says why.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from tests.unit.fleet.fakekube import FakeKube, collection_path

from jobrelay.fleet import workerclusters
from jobrelay.fleet.workers import PoolOptions, Worker, WorkerPool
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.generic import GenericKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.resources import (
    CONFIGMAPS,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    SECRETS,
    WORKER_CLUSTERS,
)
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, MIRROR_LABEL, controller_label_value
from jobrelay.vocabulary.provisioning_api import PROVISIONING_REQUESTS
from jobrelay.vocabulary.resource import Resource

NAMESPACE = "jobrelay-system"
WIDGET = GenericKind(Resource("example.com", "v1", "widgets", "Widget"))
MIRRORS = collection_path(WIDGET.ref)
REGISTRATIONS = collection_path(WORKER_CLUSTERS)
SECRETS_PATH = collection_path(SECRETS, NAMESPACE)
WORKER = "w1"


def kubeconfig(server: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": f"https://{server}"}}],
            "users": [{"name": "u", "user": {"token": "t0ken"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


def secret(text: str) -> dict[str, Any]:
    return {
        "metadata": {"name": workerclusters.secret_name(WORKER), "namespace": NAMESPACE},
        "data": {workerclusters.SECRET_KEY: base64.b64encode(text.encode()).decode()},
    }


def mirror(name: str, *, finished: bool = False) -> dict[str, Any]:
    labels = {MIRROR_LABEL: controller_label_value(DEFAULT_CONTROLLER_NAME)}
    status = {"conditions": [{"type": "Complete", "status": "True"}]} if finished else {}
    return {"metadata": {"name": name, "namespace": "team-a", "labels": labels}, "status": status}


async def until(predicate: Callable[[], Any], *, timeout: float = 5.0, what: str) -> Any:
    """Wait (with a deadline) until ``predicate()`` is truthy; returns it."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)
    return result


class Fleet:
    """A manager and the worker apiservers its Secrets may point at, by host name."""

    def __init__(self) -> None:
        self.manager = FakeKube("manager")
        self.manager.serve(REGISTRATIONS)
        self.manager.serve(SECRETS_PATH)
        self.servers: dict[str, FakeKube] = {}
        self.changed: list[WorkloadKey] = []

    def server(self, name: str, *mirrors: dict[str, Any]) -> FakeKube:
        server = FakeKube(name)
        server.serve(MIRRORS)
        # What every apiserver serves and the worker's feeds list (empty here).
        for served in (NODES, PODS, NAMESPACES, PERSISTENT_VOLUME_CLAIMS, CONFIGMAPS, SECRETS,
                       Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)):  # fmt: skip
            server.serve(collection_path(served))
        for obj in mirrors:
            server.put(MIRRORS, obj)
        self.servers[name] = server
        return server

    def register(self, server: str) -> None:
        self.manager.put(SECRETS_PATH, secret(kubeconfig(server)))
        self.manager.put(
            REGISTRATIONS,
            {
                "metadata": {"name": WORKER},
                "spec": {
                    "kubeconfigSecretRef": {
                        "name": workerclusters.secret_name(WORKER),
                        "key": workerclusters.SECRET_KEY,
                    }
                },
            },
        )

    def rotate(self, text: str) -> None:
        self.manager.put(SECRETS_PATH, secret(text))

    def client_for(
        self, config: Mapping[str, Any], context: str | None, name: str, options: ApiOptions
    ) -> ApiClient:
        del context, name, options
        server = urlsplit(config["clusters"][0]["cluster"]["server"]).hostname
        assert server is not None
        return self.servers[server].client()

    def status(self) -> dict[str, Any]:
        return dict(self.manager.collections[REGISTRATIONS][WORKER].get("status") or {})

    def condition(self) -> tuple[str, str]:
        found = next(iter(self.status().get("conditions") or []), {})
        return found.get("status", ""), found.get("reason", "")


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    yield Fleet()


def make_pool(
    fleet: Fleet, api: ApiOptions, *, health_timeout: float = 30.0, lost_timeout: float = 900.0
) -> WorkerPool:
    options = PoolOptions(
        namespace=NAMESPACE,
        controller_name=DEFAULT_CONTROLLER_NAME,
        origin="hq",
        sync_timeout=30.0,  # a test that waited this long would time out first
        status_interval=0.05,
        health_timeout=health_timeout,
        lost_timeout=lost_timeout,
        api=api,
    )
    return WorkerPool(
        fleet.manager.client(), [WIDGET], fleet.changed.append, options,
        client_factory=fleet.client_for,
    )  # fmt: skip


@pytest.fixture
async def pool(fleet: Fleet) -> AsyncIterator[WorkerPool]:
    made = make_pool(fleet, ApiOptions(connect_timeout=0.1, request_timeout=0.3))
    yield made
    await made.stop()
    await fleet.manager.clients[0].aclose()


async def connected(fleet: Fleet, pool: WorkerPool, server: str) -> Worker:
    fleet.register(server)
    await pool.start()
    await pool.wait_connected(5.0)
    worker = pool.get(WORKER)
    assert worker is not None and worker.synced(WIDGET.name) and worker.connected
    return worker


async def test_the_old_connection_serves_until_the_new_caches_have_listed(
    fleet: Fleet, pool: WorkerPool
) -> None:
    old_server = fleet.server("old", mirror("a"), mirror("b"))
    new_server = fleet.server("new", mirror("a"), mirror("b"))
    old = await connected(fleet, pool, "old")
    listing = new_server.hold_lists(MIRRORS)

    fleet.rotate(kubeconfig("new"))
    await asyncio.wait_for(new_server.lists_asked[MIRRORS].wait(), 5)
    # The new connection is listing: the pool still shows the old one, whole.
    assert pool.get(WORKER) is old
    assert old.synced(WIDGET.name) and old.connected
    assert {key.key for key in pool.mirror_keys()} == {"team-a/a", "team-a/b"}
    assert pool.has_mirror(WorkloadKey(WIDGET.name, "team-a/a"))
    assert not pool.has_mirror(WorkloadKey(WIDGET.name, "team-a/z"))
    assert old.active_mirrors() == 2

    fleet.changed.clear()
    listing.set()
    new = await until(
        lambda: (w := pool.get(WORKER)) is not old and w, what="the new connection in the pool"
    )
    assert new.synced(WIDGET.name) and new.connected
    assert new.mirror((WIDGET.name, "team-a/a")) is not None
    assert new.active_mirrors() == 2
    # Every key is looked at again through the new caches; the old watches are gone, and
    # the old client outlives any request a reconcile may have begun on it.
    assert {key.key for key in fleet.changed} >= {"team-a/a", "team-a/b"}
    await until(lambda: old_server.open_watches(MIRRORS) == 0, what="the old watch closed")
    await until(lambda: old_server.clients[0]._http.is_closed, what="the old client closed")


async def test_stopping_the_pool_closes_retired_clients_at_once(fleet: Fleet) -> None:
    pool = make_pool(fleet, ApiOptions())  # a retired client would live 35 s
    try:
        fleet.server("old", mirror("a"))
        fleet.server("new", mirror("a"))
        old = await connected(fleet, pool, "old")
        fleet.rotate(kubeconfig("new"))
        await until(lambda: pool.get(WORKER) is not old, what="the new connection")
        await until(lambda: fleet.servers["old"].open_watches(MIRRORS) == 0, what="unwatched")
        # Kept for the requests reconciles may have begun on it (they end within 35 s).
        assert not fleet.servers["old"].clients[0]._http.is_closed
    finally:
        await pool.stop()
        await fleet.manager.clients[0].aclose()
    assert fleet.servers["old"].clients[0]._http.is_closed
    assert fleet.servers["new"].clients[0]._http.is_closed


async def test_credentials_the_worker_refuses_take_effect_at_once(
    fleet: Fleet, pool: WorkerPool
) -> None:
    fleet.server("old", mirror("a"))
    fleet.server("new", mirror("a")).refuse_everyone = True
    old = await connected(fleet, pool, "old")
    fleet.rotate(kubeconfig("new"))
    new = await until(lambda: (w := pool.get(WORKER)) is not old and w, what="the new connection")
    assert not new.connected and not new.synced(WIDGET.name)
    assert new.verdict().reason == "Unauthorized"
    await until(lambda: fleet.condition() == ("False", "Unauthorized"), what="status written")


async def test_credentials_without_rights_take_effect_once_the_lists_fail(
    fleet: Fleet, pool: WorkerPool
) -> None:
    fleet.server("old", mirror("a"))
    fleet.server("new", mirror("a")).forbid_lists = True
    old = await connected(fleet, pool, "old")
    fleet.rotate(kubeconfig("new"))
    # Well before the connect timeout (30 s): a failed list is as final as a listed one.
    new = await until(lambda: (w := pool.get(WORKER)) is not old and w, what="the new connection")
    assert new.verdict().reason == "Forbidden"
    await until(lambda: fleet.condition() == ("False", "Forbidden"), what="status written")


async def test_an_unusable_secret_disconnects_the_worker_until_it_is_fixed(
    fleet: Fleet, pool: WorkerPool, caplog: pytest.LogCaptureFixture
) -> None:
    fleet.server("old", mirror("a"))
    await connected(fleet, pool, "old")
    fleet.rotate("clusters: [\n  token: s3cret-in-a-broken-line: x\n")
    await until(lambda: pool.get(WORKER) is None, what="the worker disconnected")
    await until(lambda: fleet.condition() == ("False", "InvalidKubeconfig"), what="status")
    message = fleet.status()["conditions"][0]["message"]
    assert "s3cret" not in message, message
    assert "line 2" in message, message
    # Retried every status interval, said once.
    reads = f"{SECRETS_PATH}/{workerclusters.secret_name(WORKER)}"
    await until(lambda: fleet.manager.requests.count(("GET", reads)) >= 4, what="retries")
    said = [r for r in caplog.records if "is not a kubeconfig" in r.getMessage()]
    assert len(said) == 1, said
    fleet.rotate(kubeconfig("old"))
    worker = await until(lambda: pool.get(WORKER), what="reconnected")
    await until(lambda: worker.connected, what="listed")
    await until(lambda: fleet.condition() == ("True", "Connected"), what="status")


async def test_active_mirrors_follows_finished_mirrors_within_a_status_interval(
    fleet: Fleet, pool: WorkerPool
) -> None:
    server = fleet.server("old", mirror("a"), mirror("b"))
    await connected(fleet, pool, "old")
    await until(lambda: fleet.status().get("activeMirrors") == 2, what="activeMirrors 2")
    server.put(MIRRORS, mirror("a", finished=True))
    await until(lambda: fleet.status().get("activeMirrors") == 1, what="activeMirrors 1")


async def test_a_worker_silent_for_the_lost_timeout_is_declared_lost_until_it_answers(
    fleet: Fleet,
) -> None:
    pool = make_pool(
        fleet, ApiOptions(connect_timeout=0.1, request_timeout=0.3),
        health_timeout=0.3, lost_timeout=0.5,
    )  # fmt: skip
    try:
        server = fleet.server("w", mirror("a"))
        await connected(fleet, pool, "w")
        assert [v.lost_in for v in pool.views()] == [None]
        fleet.changed.clear()
        server.refuse_everyone = True  # its probes now fail
        await until(lambda: fleet.condition()[0] == "False", what="not connected")
        (view,) = pool.views()
        assert not view.connected and not view.lost and view.lost_in is not None
        # Declared lost: written on its status, and every key it holds looked at again.
        await until(lambda: fleet.status().get("lostTime"), what="lostTime written")
        assert pool.views()[0].lost
        assert WorkloadKey(WIDGET.name, "team-a/a") in fleet.changed
        fleet.changed.clear()
        server.refuse_everyone = False
        await until(lambda: fleet.condition() == ("True", "Connected"), what="answers again")
        await until(lambda: "lostTime" not in fleet.status(), what="lostTime cleared")
        assert pool.views()[0].connected
        await until(lambda: WorkloadKey(WIDGET.name, "team-a/a") in fleet.changed, what="requeued")
    finally:
        await pool.stop()
        await fleet.manager.clients[0].aclose()


async def test_autoscaling_set_on_a_connected_worker_reconnects_it_watching_its_requests(
    fleet: Fleet, pool: WorkerPool
) -> None:
    server = fleet.server("grows", mirror("a"))
    server.serve(collection_path(PROVISIONING_REQUESTS))
    old = await connected(fleet, pool, "grows")
    assert not old.provisioning_feed.enabled

    registration = fleet.manager.collections[REGISTRATIONS][WORKER]
    shapes = {"nodeShapes": [{"cpu": "16", "memory": "64Gi", "count": 4}]}
    fleet.manager.put(
        REGISTRATIONS, {**registration, "spec": {**registration["spec"], "autoscaling": shapes}}
    )
    new = await until(
        lambda: (w := pool.get(WORKER)) is not old and w, what="the new connection in the pool"
    )
    assert new.autoscaled and new.provisioning_feed.enabled
    await until(lambda: new.provisioning_feed.listed, what="its requests listed")
    assert new.mirror((WIDGET.name, "team-a/a")) is not None
