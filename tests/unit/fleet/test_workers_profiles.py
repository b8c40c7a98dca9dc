"""The pool's workers from ClusterProfiles beside WorkerClusters, against in-memory apiservers.

One pool, one fake manager holding WorkerClusters and ClusterProfiles: a profile offering a
provider of the file connects as a worker of its name; one offering none is refused (its
worker's condition and a Warning Event on it); a name in both is the WorkerCluster's, which
carries a ClusterProfileConflict condition; ControlPlaneHealthy=False on a profile disconnects
its worker until it is True again. Real apiservers: tests/e2e/test_worker_cluster_profiles.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import pytest
from tests.unit.fleet.fakekube import collection_path
from tests.unit.fleet.test_workers import NAMESPACE, REGISTRATIONS, WIDGET, WORKER, Fleet, until

from jobrelay.fleet.cluster_profile_rules import (
    CLUSTER_PROFILE_REFUSED,
    CONTROL_PLANE_UNHEALTHY,
    NAME_CONFLICT_CONDITION,
    AccessProviderConfig,
    ClusterProfileSettings,
)
from jobrelay.fleet.workers import PoolOptions, WorkerPool
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.resources import CLUSTER_PROFILES
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

PROFILE_NAMESPACE = "fleet"
PROFILES = collection_path(CLUSTER_PROFILES, PROFILE_NAMESPACE)
PLUGIN = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/bin/true"}


class Told:
    """Stands in for the EventRecorder: what was told about which object."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], kind, reason, message))

    def about(self, name: str, reason: str) -> list[str]:
        return [m for n, _, r, m in self.events if (n, r) == (name, reason)]


def profile(name: str, provider: str, server: str, healthy: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": CLUSTER_PROFILES.api_version,
        "kind": CLUSTER_PROFILES.kind,
        "metadata": {"name": name, "namespace": PROFILE_NAMESPACE, "uid": f"uid-{name}"},
        "spec": {"displayName": name, "clusterManager": {"name": "test"}},
        "status": {
            "conditions": [{"type": "ControlPlaneHealthy", "status": healthy, "reason": "Probe"}],
            "accessProviders": [{"name": provider, "cluster": {"server": f"https://{server}"}}],
        },
    }


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    made = Fleet()
    made.manager.serve(PROFILES)
    yield made


@pytest.fixture
async def told() -> Told:
    return Told()


@pytest.fixture
async def pool(fleet: Fleet, told: Told) -> AsyncIterator[WorkerPool]:
    made = make_pool(fleet, told, leading=True)
    yield made
    await made.stop()
    await fleet.manager.clients[0].aclose()


def make_pool(fleet: Fleet, told: Told, *, leading: bool) -> WorkerPool:
    options = PoolOptions(
        namespace=NAMESPACE, controller_name=DEFAULT_CONTROLLER_NAME, origin="hq",
        sync_timeout=30.0, status_interval=0.05, health_timeout=30.0, lost_timeout=900.0,
        api=ApiOptions(connect_timeout=0.1, request_timeout=0.3, write_fence=lambda: leading),
        cluster_profiles=ClusterProfileSettings(
            PROFILE_NAMESPACE, providers=(AccessProviderConfig("token", PLUGIN),)
        ),
    )  # fmt: skip
    return WorkerPool(
        fleet.manager.client(), [WIDGET], fleet.changed.append, options,
        client_factory=fleet.client_for, events=cast(EventRecorder, told),
    )  # fmt: skip


def condition(registration: Mapping[str, Any] | None, kind: str = "Connected") -> dict[str, Any]:
    conditions = ((registration or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def registration(pool: WorkerPool, name: str) -> Mapping[str, Any] | None:
    return next((r for r in pool.registrations() if r["metadata"]["name"] == name), None)


async def test_profiles_become_workers_beside_worker_clusters_and_refusals_say_why(
    fleet: Fleet, pool: WorkerPool, told: Told
) -> None:
    fleet.server("east")
    fleet.server(WORKER)
    fleet.register(WORKER)  # the WorkerCluster w1, its Secret pointing at w1
    fleet.manager.put(PROFILES, profile("east", "token", "east"))
    fleet.manager.put(PROFILES, profile("west", "other", "east"))
    fleet.manager.put(PROFILES, profile(WORKER, "token", "east"))
    await pool.start()
    await pool.wait_connected(5.0)

    east = pool.get("east")
    assert east is not None and east.connected and east.client.server == "https://east"
    await until(lambda: condition(registration(pool, "east")).get("status") == "True",
                what="east's Connected=True kept beside its profile")  # fmt: skip
    assert told.about("east", "ClusterProfileConnected")
    # The profile's status is its cluster manager's: never written.
    assert not [p for p in fleet.manager.status_patches if p[0] in ("east", "west")]

    # A profile offering no provider of the file: no connection, and why, twice over.
    assert pool.get("west") is None
    west = await until(lambda: condition(registration(pool, "west")).get("status") == "False"
                       and condition(registration(pool, "west")), what="west refused")  # fmt: skip
    assert west["reason"] == CLUSTER_PROFILE_REFUSED
    assert "none of the access-provider file's (token)" in west["message"]
    assert told.about("west", CLUSTER_PROFILE_REFUSED) == [west["message"]]
    view = next(v for v in pool.views() if v.name == "west")
    assert view.worker is None and not view.connected

    # The WorkerCluster keeps its name: connected through its Secret, with a conflict
    # condition; the profile of that name is refused.
    w1 = pool.get(WORKER)
    assert w1 is not None and w1.client.server == f"https://{WORKER}"

    def stored() -> dict[str, Any]:
        return fleet.manager.collections[REGISTRATIONS][WORKER]

    await until(lambda: condition(stored(), NAME_CONFLICT_CONDITION), what="the conflict shown")
    assert (
        f"ClusterProfile {PROFILE_NAMESPACE}/{WORKER}"
        in condition(stored(), NAME_CONFLICT_CONDITION)["message"]
    )
    assert "WorkerCluster w1 has the same name" in told.about(WORKER, CLUSTER_PROFILE_REFUSED)[0]
    (only,) = [r for r in pool.registrations() if r["metadata"]["name"] == WORKER]
    assert "kubeconfigSecretRef" in only["spec"]

    # The profile leaves the selection: the WorkerCluster's condition goes.
    del fleet.manager.collections[PROFILES][WORKER]
    fleet.manager._emit(PROFILES, "DELETED", profile(WORKER, "token", "east"))
    await until(lambda: not condition(stored(), NAME_CONFLICT_CONDITION), what="conflict over")


async def test_a_profile_whose_control_plane_is_unhealthy_is_not_connected(
    fleet: Fleet, pool: WorkerPool
) -> None:
    fleet.server("east")
    fleet.manager.put(PROFILES, profile("east", "token", "east"))
    await pool.start()
    await pool.wait_connected(5.0)
    east = pool.get("east")
    assert east is not None and east.connected

    fleet.manager.put(PROFILES, profile("east", "token", "east", healthy="False"))
    await until(lambda: not east.connected, what="east unhealthy")
    assert east.verdict().reason == CONTROL_PLANE_UNHEALTHY
    assert "ControlPlaneHealthy=False (Probe)" in east.verdict().message
    await until(lambda: condition(registration(pool, "east")).get("reason")
                == CONTROL_PLANE_UNHEALTHY, what="its condition says so")  # fmt: skip
    assert pool.get("east") is east, "its connection is kept: only its health changed"

    fleet.manager.put(PROFILES, profile("east", "token", "east"))
    await until(lambda: east.connected, what="east healthy again")


async def test_a_standby_keeps_a_profile_workers_status_and_tells_nothing(
    fleet: Fleet, told: Told
) -> None:
    standby = make_pool(fleet, told, leading=False)
    try:
        fleet.server("east")
        fleet.manager.put(PROFILES, profile("east", "token", "east"))
        fleet.manager.put(PROFILES, profile("west", "other", "east"))
        await standby.start()
        await standby.wait_connected(5.0)
        await until(lambda: condition(registration(standby, "east")).get("status") == "True"
                    and condition(registration(standby, "west")).get("reason")
                    == CLUSTER_PROFILE_REFUSED, what="both shown by the standby")  # fmt: skip
        assert told.events == []
    finally:
        await standby.stop()
        await fleet.manager.clients[0].aclose()
