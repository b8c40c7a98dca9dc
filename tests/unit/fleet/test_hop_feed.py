"""A worker's hop feed: the objects its operators make from mirrors (a RayJob's RayCluster
and submitter Job, an MPIJob's launcher Job, a TrainJob's JobSet) feeding its capacity
tracker, so that ``Worker.pods_of`` finds every kind's pods; a hop it may not list is said
once and changes nothing else."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from tests.unit.fleet.fakekube import collection_path
from tests.unit.fleet.test_workers import NAMESPACE, WORKER, Fleet, until
from tests.unit.fleet.test_workers_parts import FakeInformer
from tests.unit.placement.test_tracker_hops import (
    JOB,
    JOBSET,
    MPIJOB,
    RAY_CLUSTER,
    RAYCLUSTER,
    RAYJOB,
    RAYJOB_M,
    SUBMITTER,
    TRAINJOB,
    job_pod,
    made,
    pod,
)

from jobrelay.fleet.workers import PoolOptions, Worker, WorkerPool
from jobrelay.fleet.workers.feed_base import FeedWiring
from jobrelay.fleet.workers.hop_feed import HopFeed, hop_controllers
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NODES, PODS
from jobrelay.kube.watching import InformerEvent, InformerOptions
from jobrelay.placement.slim_objects import slim_hop, slim_pod
from jobrelay.placement.tracker import OwnedPods
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, MIRROR_LABEL, controller_label_value

KINDS = {kind.ref.kind: kind for kind in DEDICATED.values()}
RAYJOB_KIND = KINDS["RayJob"]


def test_each_hop_resource_is_watched_for_the_kinds_that_make_it() -> None:
    assert hop_controllers(DEDICATED.values()) == {
        RAYCLUSTER: {(RAYJOB.group, RAYJOB.kind)},
        JOB: {(RAYJOB.group, RAYJOB.kind), (MPIJOB.group, MPIJOB.kind)},
        JOBSET: {(TRAINJOB.group, TRAINJOB.kind)},
    }
    # Kinds whose pods are their own watch nothing more.
    assert hop_controllers([KINDS["Job"], KINDS["JobSet"], KINDS["RayCluster"]]) == {}


async def test_one_informer_per_hop_resource_of_the_configured_kinds() -> None:
    # Never asked: the informers are made, not started.
    unasked = httpx2.MockTransport(lambda request: httpx2.Response(500))
    client = ApiClient(httpx2.AsyncClient(transport=unasked, base_url="https://w"), cluster="w")
    feed = HopFeed("w", Worker("w", client, ("s",)).tracker)
    wiring = FeedWiring(client, InformerOptions(), changed=lambda: None,
                        kinds=[RAYJOB_KIND, KINDS["MPIJob"]])  # fmt: skip
    opened = feed._open(wiring)
    await client.aclose()
    assert [informer for informer, _ in opened] == list(feed.informers())
    assert sorted(feed.by_ref, key=lambda ref: ref.plural) == [JOB, RAYCLUSTER]
    assert [informer.name for informer in feed.informers()] == ["w/rayclusters", "w/jobs"]


def event(key: str, new: dict[str, Any] | None) -> InformerEvent:
    return InformerEvent("ADDED" if new is not None else "DELETED", key, None, new)


def test_a_workers_pods_of_a_rayjob_mirror_are_its_clusters_and_submitters() -> None:
    client: Any = object()
    worker = Worker("w", client, ("s",))
    worker.capacity_feed.pods = FakeInformer("w/pods")  # type: ignore[assignment]
    mirrors = FakeInformer("w/rayjobs")
    mirrors.objects["team-a/train"] = made(*RAYJOB_M)
    worker.mirrors[RAYJOB_KIND.name] = mirrors  # type: ignore[assignment]
    feed = worker.hop_feed
    controllers = hop_controllers([RAYJOB_KIND])
    for obj in (pod("train-x8k2p-head", RAY_CLUSTER, node="n1"),
                job_pod("train-abcde", SUBMITTER, since="2026-03-01T12:00:00Z")):  # fmt: skip
        worker.capacity_feed._pod_changed(event(f"team-a/{obj['metadata']['name']}", slim_pod(obj)))
    assert worker.pods_of("team-a", "train") == OwnedPods()
    # A RayCluster and a Job may share a name: each resource keys its own.
    namesake = made(JOB, "train-x8k2p", "n-uid", RAYJOB_M)
    for ref, obj in ((RAYCLUSTER, made(*RAY_CLUSTER, RAYJOB_M)), (JOB, namesake),
                     (JOB, made(*SUBMITTER, RAYJOB_M))):  # fmt: skip
        assert feed._apply(ref, event(f"team-a/{obj['metadata']['name']}",
                                      slim_hop(obj, controllers[ref])))  # fmt: skip
    assert worker.pods_of("team-a", "train") == OwnedPods(2, 1, True, "2026-03-01T12:00:00Z")
    assert feed._apply(JOB, event("team-a/train-x8k2p", None))  # the namesake Job went
    assert worker.pods_of("team-a", "train").total == 2
    assert feed._apply(RAYCLUSTER, event("team-a/train-x8k2p", None))
    assert worker.pods_of("team-a", "train").total == 1


def test_a_hop_it_may_not_list_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    feed = HopFeed("w", Worker("w", object(), ("s",)).tracker)  # type: ignore[arg-type]
    refused = ApiError(403, "Forbidden", 'cannot list resource "rayclusters"')
    feed.by_ref = {
        RAYCLUSTER: FakeInformer("w/rayclusters", synced=False, error=refused),  # type: ignore[dict-item]
        JOB: FakeInformer("w/jobs"),  # type: ignore[dict-item]
    }
    with caplog.at_level(logging.WARNING):
        feed.tell_refusals()
        feed.tell_refusals()
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "cannot list w/rayclusters (Forbidden" in warned[0]


# -- through the pool, against an in-memory apiserver ---------------------------------------

RAYJOBS_PATH = collection_path(RAYJOB)
JOBS_PATH = collection_path(JOB)
RAYCLUSTERS_PATH = collection_path(RAYCLUSTER)


@pytest.fixture
async def fleet_pool() -> AsyncIterator[tuple[Fleet, WorkerPool]]:
    fleet = Fleet()
    server = fleet.server("w")
    for path in (collection_path(NODES), collection_path(PODS), RAYJOBS_PATH, JOBS_PATH,
                 RAYCLUSTERS_PATH):  # fmt: skip
        server.serve(path)
    mirror = made(*RAYJOB_M)
    mirror["metadata"]["labels"] = {MIRROR_LABEL: controller_label_value(DEFAULT_CONTROLLER_NAME)}
    server.put(RAYJOBS_PATH, mirror)
    server.put(JOBS_PATH, made(*SUBMITTER, RAYJOB_M))
    server.put(collection_path(PODS), job_pod("train-abcde", SUBMITTER, node="n1"))
    options = PoolOptions(
        namespace=NAMESPACE, controller_name=DEFAULT_CONTROLLER_NAME, origin="hq",
        sync_timeout=30.0, status_interval=0.05, health_timeout=30.0, lost_timeout=900.0,
        api=ApiOptions(connect_timeout=0.1, request_timeout=0.3),
    )  # fmt: skip
    pool = WorkerPool(
        fleet.manager.client(), [RAYJOB_KIND], fleet.changed.append, options,
        client_factory=fleet.client_for,
    )  # fmt: skip
    fleet.register("w")
    yield fleet, pool
    await pool.stop()
    await fleet.manager.clients[0].aclose()


async def test_the_pool_ties_a_submitters_pod_to_its_rayjob_mirror(
    fleet_pool: tuple[Fleet, WorkerPool], caplog: pytest.LogCaptureFixture
) -> None:
    fleet, pool = fleet_pool
    # Its credential may not list RayClusters: said once, the submitter's pod still counts.
    fleet.servers["w"].forbid(RAYCLUSTERS_PATH)
    with caplog.at_level(logging.WARNING):
        await pool.start()
        worker = await until(lambda: pool.get(WORKER), what="the worker")
        found = await until(
            lambda: (p := worker.pods_of("team-a", "train")) and p.total and p,
            what="the submitter's pod counted for the mirror",
        )
        assert found == OwnedPods(1, 1, True, None)
        # Said by the worker's status sync (tell_refusals: once, see above).
        await until(
            lambda: any(r.name.endswith("hop_feed") for r in caplog.records),
            what="the refusal said",
        )
    told = [r.getMessage() for r in caplog.records if r.name.endswith("hop_feed")]
    assert told and "w/rayclusters" in told[0]
    assert worker.connected
