"""The runner's wiring: which kinds it serves, what it builds from the options, how it runs."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from tests.unit.controller.builders import COMPLETE, CONTROLLER, job
from tests.unit.controller.fakes import FakeCluster, FakeInformer

from jobrelay.admission.workload_reads import slim_namespace
from jobrelay.controller import crd_checks, leader_passes, runner
from jobrelay.controller.options import (
    DEFAULTS,
    ControllerOptions,
    KindSettings,
    LeaderElectionSettings,
)
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.fleet.relayqueues import RelayQueueCache
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.generic import GenericKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.queueing import Lane, RequeueAfter
from jobrelay.kube.watching import Change, InformerEvent

JOB = JobKind()

BATCH = [
    {"name": "jobs", "kind": "Job", "namespaced": True},
    {"name": "jobs/status", "kind": "Job", "namespaced": True},
    {"name": "cronjobs", "kind": "CronJob", "namespaced": True},
]
WORKER_CLUSTERS = [
    {"name": "workerclusters", "kind": "WorkerCluster", "namespaced": False},
    {"name": "relayqueues", "kind": "RelayQueue", "namespaced": False},
]
JOBSETS = [{"name": "jobsets", "kind": "JobSet", "namespaced": True}]
EXAMPLE = [
    # A subresource listed first must not be taken for the kind.
    {"name": "mice/status", "kind": "Mouse", "namespaced": True},
    {"name": "mice", "kind": "Mouse", "namespaced": True},
    {"name": "clusterwidgets", "kind": "ClusterWidget", "namespaced": False},
]


@pytest.fixture
async def manager() -> AsyncIterator[tuple[FakeCluster, ApiClient]]:
    cluster = FakeCluster(
        "manager",
        served={
            "batch/v1": BATCH,
            "jobset.x-k8s.io/v1alpha2": JOBSETS,
            "example.com/v1": EXAMPLE,
            "jobrelay.dev/v1alpha1": WORKER_CLUSTERS,
        },
    )
    client = cluster.client()
    yield cluster, client
    await client.aclose()


def options_for(*names: str, **kind_settings: Any) -> ControllerOptions:
    return ControllerOptions(kinds=KindSettings(names=names, **kind_settings))


# -- managed_by -------------------------------------------------------------------------


def test_managed_by_keeps_only_our_objects_slimmed() -> None:
    transform = runner.managed_by(JOB, CONTROLLER)
    ours = job()
    ours["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    kept = transform(ours)
    assert kept is not None
    assert "managedFields" not in kept["metadata"]
    assert (kept["apiVersion"], kept["kind"]) == ("batch/v1", "Job")
    assert transform({**job(), "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}) is None
    assert transform({**job(), "spec": {}}) is None
    assert transform({"metadata": {"name": "bare"}}) is None


# -- resolve_kinds ----------------------------------------------------------------------


async def test_resolve_the_default_kind(manager: tuple[FakeCluster, ApiClient]) -> None:
    kinds = await runner.resolve_kinds(manager[1], ControllerOptions())
    assert [type(k) for k in kinds] == [JobKind]


async def test_resolve_dedicated_and_generic_kinds_with_served_plurals(
    manager: tuple[FakeCluster, ApiClient],
) -> None:
    options = options_for(
        "Job.v1.batch",
        "JobSet.v1alpha2.jobset.x-k8s.io",
        "Mouse.v1.example.com",
        "Job.v1.batch",
        finished_conditions=("Done",),
    )
    kinds = await runner.resolve_kinds(manager[1], options)
    assert [type(k) for k in kinds] == [JobKind, JobSetKind, GenericKind]
    mouse = kinds[2]
    assert isinstance(mouse, GenericKind)
    assert mouse.ref.plural == "mice"  # from discovery, not the conventional "mouses"
    assert mouse.finished_conditions == ("Done",)
    requested = [p for m, p, _ in manager[0].requests if m == "GET"]
    assert requested == [
        "/apis/batch/v1",
        "/apis/jobset.x-k8s.io/v1alpha2",
        "/apis/example.com/v1",
        "/apis/batch/v1",
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "Widget.v1.widgets.example.org",
            "--kind Widget.v1.widgets.example.org: the management cluster does not serve "
            "widgets.example.org/v1: install the CRD of Widget first",
        ),
        (
            "Rat.v1.example.com",
            "--kind Rat.v1.example.com: the management cluster serves example.com/v1 but no "
            "kind Rat in it (it has: ClusterWidget, Mouse)",
        ),
        (
            "ClusterWidget.v1.example.com",
            "--kind ClusterWidget.v1.example.com: cluster-scoped kinds cannot be dispatched",
        ),
    ],
)
async def test_kinds_the_manager_cannot_serve_stop_the_start(
    manager: tuple[FakeCluster, ApiClient], name: str, message: str
) -> None:
    with pytest.raises(runner.ConfigurationError) as raised:
        await runner.resolve_kinds(manager[1], options_for("Job.v1.batch", name))
    assert str(raised.value) == message


async def test_no_kind_or_no_finishing_condition_stops_the_start(
    manager: tuple[FakeCluster, ApiClient],
) -> None:
    with pytest.raises(runner.ConfigurationError, match="at least one --kind"):
        await runner.resolve_kinds(manager[1], options_for())
    with pytest.raises(runner.ConfigurationError, match="finishing condition"):
        await runner.resolve_kinds(
            manager[1], options_for("Mouse.v1.example.com", finished_conditions=())
        )


async def test_discovery_failing_otherwise_is_an_api_error(
    manager: tuple[FakeCluster, ApiClient],
) -> None:
    manager[0].fail("GET", "/apis/batch/v1", 503, "ServiceUnavailable")
    with pytest.raises(ApiError) as raised:
        await runner.resolve_kinds(manager[1], ControllerOptions())
    assert raised.value.code == 503


# -- the Controller -----------------------------------------------------------------------


OPTIONS = ControllerOptions(
    controller_name="example.com/relay",
    origin="hq",
    concurrency=2,
    gc_interval=0.0,
    queue=dataclasses.replace(DEFAULTS.queue, retry_base_delay=0.5),
    workers=dataclasses.replace(DEFAULTS.workers, namespace="relay-system"),
    relay=dataclasses.replace(
        DEFAULTS.relay,
        create_namespaces=False,
        keep_finished_mirrors=True,
        rejected_retry=7.0,
        unplaceable_retry=9.0,
    ),
    # One replica alone here; the elected runs are tested in test_runner_election.py.
    leader_election=LeaderElectionSettings(enabled=False),
    metrics_address="",  # never :8080 in tests
)


@pytest.fixture
async def controller(
    manager: tuple[FakeCluster, ApiClient],
) -> AsyncIterator[runner.Controller]:
    yield runner.Controller(manager[1], OPTIONS, [JOB, JobSetKind()])


def test_the_controller_is_built_from_the_options(controller: runner.Controller) -> None:
    assert list(controller.kinds) == [JOB.name, "JobSet.v1alpha2.jobset.x-k8s.io"]
    reconciler = controller.reconciler
    settings = reconciler._settings
    assert (settings.controller_name, settings.origin) == ("example.com/relay", "hq")
    assert settings.keep_finished_mirrors is True
    assert settings.unplaceable_retry == 9.0
    executor = reconciler._executor
    assert executor.create_namespaces is False and executor.rejected_retry == 7.0
    assert executor.pool is controller.pool and executor.events is controller.events
    assert controller.pool._options.namespace == "relay-system"
    assert controller.pool._options.controller_name == "example.com/relay"
    assert controller.queue._options.retry_base_delay == 0.5
    # The management caches keep only the objects of this controller name.
    informer = controller.kinds[JOB.name].objects
    assert informer._transform is not None
    assert informer._transform(job()) is None
    assert informer._transform({**job(), "spec": {"managedBy": "example.com/relay"}})


async def test_informer_events_enqueue_the_kinds_key(controller: runner.Controller) -> None:
    handler = controller.routing.workload_handler(JOB.name)
    handler(InformerEvent(Change.ADDED, "team-a/train", None, job()))
    assert await controller.queue.get() == WorkloadKey(JOB.name, "team-a/train")


def test_a_workload_that_finishes_wakes_the_admission_pass(controller: runner.Controller) -> None:
    handler = controller.routing.workload_handler(JOB.name)
    handler(InformerEvent(Change.UPDATED, "team-a/train", job(), job()))
    assert not controller.capacity_changed.is_set()
    done = {**job(), "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    handler(InformerEvent(Change.UPDATED, "team-a/train", job(), done))
    assert controller.capacity_changed.is_set()


class RunningInformer(FakeInformer):
    """A management cache with the lifecycle the Controller drives."""

    def __init__(self, objects: dict[str, Any]) -> None:
        super().__init__(objects)
        self.handlers: list[Callable[[InformerEvent], None]] = []
        self.calls: list[str] = []

    def add_handler(self, handler: Callable[[InformerEvent], None]) -> None:
        self.handlers.append(handler)

    def start(self) -> None:
        self.calls.append("start")
        for key, obj in self.objects.items():
            for handler in self.handlers:
                handler(InformerEvent(Change.ADDED, key, None, obj))

    async def wait_synced(self) -> None:
        self.calls.append("wait_synced")

    async def stop(self) -> None:
        self.calls.append("stop")


def stub_pool(controller: runner.Controller, calls: list[str]) -> None:
    async def start() -> None:
        calls.append("start")

    async def wait_connected(timeout: float) -> None:
        calls.append(f"wait_connected {timeout}")

    async def stop() -> None:
        calls.append("stop")

    pool: Any = controller.pool
    pool.start, pool.wait_connected, pool.stop = start, wait_connected, stop


async def test_run_syncs_first_reconciles_then_stops_cleanly(
    manager: tuple[FakeCluster, ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, client = manager
    calls: list[str] = []

    async def install_crd(c: ApiClient, **_: Any) -> None:
        calls.append("install_crd")

    async def ensure_namespace(c: ApiClient, namespace: str) -> None:
        calls.append(f"namespace {namespace}")

    monkeypatch.setattr(runner.workerclusters, "install_crd", install_crd)
    monkeypatch.setattr(runner.workerclusters, "ensure_namespace", ensure_namespace)
    options = dataclasses.replace(OPTIONS, gc_interval=3600.0)
    controller = runner.Controller(client, options, [JOB])
    informer = RunningInformer({"team-a/train": job()})
    controller.kinds[JOB.name] = KindRuntime(JOB, informer)  # type: ignore[arg-type]
    controller.namespaces = RunningInformer({})  # type: ignore[assignment]
    controller.queue_admission.informers = ()  # no PriorityClasses, no ResourceQuotas
    controller.queues = RelayQueueCache(client, informer=RunningInformer({}))  # type: ignore[arg-type]
    # The manager's ConfigMaps, Secrets and ServiceAccounts: none referenced here.
    sources: Any = controller.sources.informers
    for dependency_kind in list(sources):
        sources[dependency_kind] = RunningInformer({})
    pool_calls: list[str] = []
    stub_pool(controller, pool_calls)
    reconciled: list[tuple[WorkloadKey, Any]] = []
    done = asyncio.Event()
    reconcile = controller.reconciler.reconcile

    async def spy(key: WorkloadKey) -> Any:
        answer = await reconcile(key)
        reconciled.append((key, answer))
        done.set()
        return answer

    monkeypatch.setattr(controller.reconciler, "reconcile", spy)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    async with asyncio.timeout(10):
        await done.wait()
        stop.set()
        await task
    assert calls == ["namespace relay-system"]  # the CRD is ensure_crds's, before
    assert informer.calls == ["start", "wait_synced", "stop"]
    assert pool_calls == ["start", f"wait_connected {options.workers.sync_timeout}", "stop"]
    # No worker is registered: nothing can take it, so it is looked at again later, in
    # the background (a capacity change brings it back at once when it fits).
    assert reconciled == [
        (WorkloadKey(JOB.name, "team-a/train"), RequeueAfter(9.0, Lane.BACKGROUND))
    ]
    # The Warning Event was written before the recorder closed.
    assert [e["reason"] for e in cluster.events] == ["NotPlaced"]


async def test_resync_requeues_in_the_background_the_keys_that_may_need_work(
    controller: runner.Controller,
) -> None:
    informer = FakeInformer(
        {
            "team-a/new": job(),
            "team-a/held": job(suspend=True),
            "team-a/done": job(status=COMPLETE),
        }
    )
    controller.kinds[JOB.name] = KindRuntime(JOB, informer)  # type: ignore[arg-type]
    mirror_key = WorkloadKey("JobSet.v1alpha2.jobset.x-k8s.io", "team-b/c")
    pool: Any = controller.pool
    pool.mirror_keys = lambda: {mirror_key}
    queued = asyncio.Event()
    add = controller.queue.add

    def spy(key: WorkloadKey, lane: Lane = Lane.FRESH) -> None:
        add(key, lane)
        if len(controller.queue) == 2:
            queued.set()

    queue: Any = controller.queue
    queue.add = spy
    resync = asyncio.create_task(  # gc_interval is 0: at once
        leader_passes.resync(
            controller.options.gc_interval, controller.kinds, controller.pool, controller.queue
        )
    )
    try:
        async with asyncio.timeout(10):
            await queued.wait()
    finally:
        resync.cancel()
    assert controller.queue.waiting_in(Lane.BACKGROUND) == 2
    keys = {await controller.queue.get() for _ in range(2)}
    assert keys == {WorkloadKey(JOB.name, "team-a/new"), mirror_key}


def test_watch_events_go_to_the_lane_their_change_needs(controller: runner.Controller) -> None:
    handler = controller.routing.workload_handler(JOB.name)
    placed = job(placed="w1", history=("w1",))
    handler(InformerEvent(Change.ADDED, "team-a/new", None, job()))
    handler(InformerEvent(Change.ADDED, "team-a/running", None, placed))
    assert controller.queue.waiting_in(Lane.FRESH) == 1
    assert controller.queue.waiting_in(Lane.STATUS) == 1
    # A status write of a placed Job whose mirror no cache shows: it is to be created.
    handler(InformerEvent(Change.UPDATED, "team-a/running", placed, placed))
    assert controller.queue.waiting_in(Lane.FRESH) == 2
    pool: Any = controller.pool
    pool.has_mirror = lambda key: True
    handler(InformerEvent(Change.UPDATED, "team-a/other", placed, placed))
    assert controller.queue.waiting_in(Lane.STATUS) == 1


def test_mirror_changes_are_status_copies(controller: runner.Controller) -> None:
    controller.routing.mirror_changed(WorkloadKey(JOB.name, "team-a/train"))
    assert controller.queue.waiting_in(Lane.STATUS) == 1


async def test_capacity_passes_queue_placements_fresh_and_pending_timeouts_as_status(
    controller: runner.Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    fits, stuck = WorkloadKey(JOB.name, "team-a/fits"), WorkloadKey(JOB.name, "team-a/stuck")
    reconciler: Any = controller.reconciler
    reconciler.placeable_held = lambda: [fits]
    reconciler.unschedulable = lambda: [stuck]
    monkeypatch.setattr(leader_passes, "HELD_PASS_INTERVAL", 3600.0)
    controller.capacity_changed.set()
    passing = asyncio.create_task(
        leader_passes.place_held(
            controller.capacity_changed, controller.reconciler, controller.queue
        )
    )
    await asyncio.sleep(0)  # the pass runs up to its pause
    passing.cancel()
    assert len(controller.queue) == 2
    assert controller.queue.waiting_in(Lane.FRESH) == 1
    assert await controller.queue.get() == fits
    assert await controller.queue.get() == stuck


# -- run() ---------------------------------------------------------------------------------


class SignalledController:
    """Stands in for the Controller: asks the process to stop, as an operator would."""

    built: list[tuple[ApiClient, ControllerOptions, list[WorkloadKind]]] = []

    def __init__(
        self,
        manager: ApiClient,
        options: ControllerOptions,
        kinds: list[WorkloadKind],
        **_: Any,
    ) -> None:
        self.built.append((manager, options, kinds))

    async def run(self, stop: asyncio.Event) -> None:
        signal.raise_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            await stop.wait()


async def test_run_stops_on_sigterm_and_closes_the_manager(
    manager: tuple[FakeCluster, ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, client = manager
    monkeypatch.setattr(runner, "Controller", SignalledController)
    SignalledController.built.clear()
    asked: list[ApiClient] = []

    async def kube_system_uid(asked_client: ApiClient) -> str:
        asked.append(asked_client)
        return "kube-system-uid"

    monkeypatch.setattr(runner.workerclusters, "default_origin", kube_system_uid)
    await runner.run(client, ControllerOptions())
    ((built_with, options, kinds),) = SignalledController.built
    assert built_with is client and [type(k) for k in kinds] == [JobKind]
    # Without --origin, the management cluster is identified by its kube-system UID,
    # recorded in its namespace on this first start.
    assert options.origin == "kube-system-uid" and asked == [client]
    record = cluster.get("configmaps", "jobrelay-system/jobrelay-relay-origin")
    assert record is not None and record["data"] == {"origin": "kube-system-uid"}
    assert client._http.is_closed
    # The handlers are gone again.
    assert not asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
    assert not asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)


async def test_run_with_a_bad_configuration_still_cleans_up(
    manager: tuple[FakeCluster, ApiClient],
) -> None:
    _, client = manager
    with pytest.raises(runner.ConfigurationError):
        await runner.run(client, options_for("Nope.v1.example.net"))
    assert client._http.is_closed
    assert not asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)


def test_namespaces_are_cached_with_jobrelays_annotations_and_their_labels() -> None:
    namespace = {
        "metadata": {
            "name": "team-a", "resourceVersion": "7", "uid": "u", "labels": {"a": "b"},
            "annotations": {"jobrelay.dev/clusters": "w1", "other.io/x": "y"},
        },
        "spec": {"finalizers": ["kubernetes"]},
    }  # fmt: skip
    assert slim_namespace(namespace) == {
        "metadata": {
            "name": "team-a", "resourceVersion": "7", "uid": "u",
            "annotations": {"jobrelay.dev/clusters": "w1"}, "labels": {"a": "b"},
        }
    }  # fmt: skip


async def test_a_namespace_policy_change_requeues_its_held_workloads(
    controller: runner.Controller,
) -> None:
    held = [WorkloadKey(JOB.name, "team-a/one"), WorkloadKey(JOB.name, "team-b/two")]
    controller.memory._held = dict.fromkeys(held, "NotPlaced|")
    policy = {"metadata": {"name": "team-a", "annotations": {"jobrelay.dev/clusters": "w2"}}}
    controller.routing.namespace_changed(InformerEvent(Change.UPDATED, "team-a", None, policy))
    assert controller.queue.waiting_in(Lane.FRESH) == 1
    assert controller.memory.policy("team-a").clusters == ("w2",)  # type: ignore[union-attr]
    controller.routing.namespace_changed(InformerEvent(Change.DELETED, "team-a", policy, None))
    assert "team-a" not in controller.memory._policies


def test_a_relayqueue_change_looks_again_at_what_waits_on_a_queue(
    controller: runner.Controller,
) -> None:
    lost, refused, full = (WorkloadKey(JOB.name, f"team-a/{n}") for n in ("a", "b", "c"))
    controller.memory._held = {lost: "QueueNotFound|x", refused: "QueueNotAllowed|y",
                               full: "NotPlaced|"}  # fmt: skip
    controller.routing.queues_changed()
    assert controller.capacity_changed.is_set()  # a pass: the quotas may have changed
    assert controller.queue.waiting_in(Lane.FRESH) == 2


async def test_a_namespace_change_gives_queue_admission_its_labels(
    controller: runner.Controller,
) -> None:
    labelled = {"metadata": {"name": "team-a", "labels": {"team": "a"}}}
    controller.routing.namespace_changed(InformerEvent(Change.UPDATED, "team-a", None, labelled))
    assert controller.queue_admission._labels["team-a"] == {"team": "a"}
    controller.routing.namespace_changed(InformerEvent(Change.DELETED, "team-a", labelled, None))
    assert "team-a" not in controller.queue_admission._labels


# -- ensure_crds --------------------------------------------------------------------------

WORKER_CLUSTERS_SERVED = {"jobrelay.dev/v1alpha1": WORKER_CLUSTERS}


async def test_without_install_crds_a_served_crd_is_only_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def install_crd(_client: ApiClient, **_: Any) -> None:
        raise AssertionError("--install-crds was not given")

    monkeypatch.setattr(runner.workerclusters, "install_crd", install_crd)
    cluster = FakeCluster("manager", served=WORKER_CLUSTERS_SERVED)
    async with cluster.client() as client:
        await crd_checks.ensure_crds(client, ControllerOptions())


async def test_without_install_crds_a_missing_crd_says_what_to_do() -> None:
    async with FakeCluster("manager", served={"batch/v1": BATCH}).client() as client:
        with pytest.raises(runner.ConfigurationError) as missing:
            await crd_checks.ensure_crds(client, ControllerOptions())
    message = str(missing.value)
    assert "\n" not in message
    assert "kubectl apply --server-side -f charts/jobrelay/files/crds/" in message
    assert "--install-crds" in message


async def test_without_install_crds_a_missing_relayqueue_crd_says_what_to_do() -> None:
    served = {"jobrelay.dev/v1alpha1": WORKER_CLUSTERS[:1]}  # an older install: no queues
    async with FakeCluster("manager", served=served).client() as client:
        with pytest.raises(runner.ConfigurationError) as missing:
            await crd_checks.ensure_crds(client, ControllerOptions())
    message = str(missing.value)
    assert "RelayQueue CRD (relayqueues.jobrelay.dev)" in message and "\n" not in message
    assert "kubectl apply --server-side -f charts/jobrelay/files/crds/" in message


async def test_install_crds_applies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[str] = []

    async def install_crd(_client: ApiClient, **given: Any) -> None:
        installed.append(given["manifest"]["metadata"]["name"] if given else "crd")

    monkeypatch.setattr(runner.workerclusters, "install_crd", install_crd)
    async with FakeCluster("manager", served={}).client() as client:
        await crd_checks.ensure_crds(client, ControllerOptions(install_crds=True))
    assert installed == ["crd", "relayqueues.jobrelay.dev"]


async def test_install_crds_refused_by_rbac_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def install_crd(_client: ApiClient, **_: Any) -> None:
        raise ApiError(403, "Forbidden", "cannot patch customresourcedefinitions")

    monkeypatch.setattr(runner.workerclusters, "install_crd", install_crd)
    async with FakeCluster("manager", served={}).client() as client:
        with pytest.raises(runner.ConfigurationError) as refused:
            await crd_checks.ensure_crds(client, ControllerOptions(install_crds=True))
    assert "run without --install-crds" in str(refused.value)


# -- the managedBy value and field each kind claims -------------------------------------

RAY = [{"name": "rayjobs", "kind": "RayJob", "namespaced": True}]
KUBEFLOW = [{"name": "pytorchjobs", "kind": "PyTorchJob", "namespaced": True}]
MULTIKUEUE_CRDS = [
    {"name": "multikueueclusters", "kind": "MultiKueueCluster", "namespaced": False},
    {"name": "clusterqueues", "kind": "ClusterQueue", "namespaced": False},
]


def test_managed_by_reads_each_kinds_field_and_claimed_value() -> None:
    from jobrelay.kinds.catalog import DEDICATED

    pytorch = runner.managed_by(
        DEDICATED["PyTorchJob.v1.kubeflow.org"], "kueue.x-k8s.io/multikueue"
    )
    ours = {
        "metadata": {"name": "p"},
        "spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}},
    }
    assert pytorch(ours) is not None
    assert (
        pytorch({"metadata": {"name": "p"}, "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})
        is None
    )
    assert pytorch({"metadata": {"name": "p"}, "spec": {"runPolicy": None}}) is None


async def ray_manager(*, multikueue: bool) -> tuple[FakeCluster, ApiClient]:
    served = {"batch/v1": BATCH, "ray.io/v1": RAY, "kubeflow.org/v1": KUBEFLOW}
    if multikueue:
        served["kueue.x-k8s.io/v1beta1"] = MULTIKUEUE_CRDS
    cluster = FakeCluster("manager", served=served)
    return cluster, cluster.client()


async def test_a_value_the_crd_refuses_stops_the_start() -> None:
    _, client = await ray_manager(multikueue=False)
    async with client:
        with pytest.raises(runner.ConfigurationError) as raised:
            await runner.resolve_kinds(client, options_for("Job.v1.batch", "RayJob.v1.ray.io"))
    assert str(raised.value).startswith(
        "--kind RayJob.v1.ray.io: 'jobrelay.dev/relay' is a value its CRD refuses"
    )
    assert "write --kind RayJob.v1.ray.io=kueue.x-k8s.io/multikueue" in str(raised.value)


async def test_the_borrowed_value_starts_where_multikueue_is_not_installed() -> None:
    cluster, client = await ray_manager(multikueue=False)
    options = options_for(
        "RayJob.v1.ray.io",
        "PyTorchJob.v1.kubeflow.org",
        managed_by=(("RayJob.v1.ray.io", "kueue.x-k8s.io/multikueue"),),
    )
    async with client:
        kinds = await runner.resolve_kinds(client, options)
    assert [k.name for k in kinds] == ["RayJob.v1.ray.io", "PyTorchJob.v1.kubeflow.org"]
    assert ("GET", "/apis/kueue.x-k8s.io") in [(m, p) for m, p, _ in cluster.requests]
    assert options.kinds.claimed("RayJob.v1.ray.io", "c") == "kueue.x-k8s.io/multikueue"
    assert options.kinds.claimed("PyTorchJob.v1.kubeflow.org", "c") == "c"


async def test_a_kueue_version_listed_but_not_served_yet_is_no_multikueue() -> None:
    """The group lists a version whose path still answers 404 (a CRD being installed or
    removed): nothing of it is served at that moment, and the start goes on."""
    cluster, client = await ray_manager(multikueue=True)
    cluster.fail("GET", "/apis/kueue.x-k8s.io/v1beta1", 404, "NotFound")
    options = options_for(
        "RayJob.v1.ray.io", managed_by=(("RayJob.v1.ray.io", "kueue.x-k8s.io/multikueue"),)
    )
    async with client:
        kinds = await runner.resolve_kinds(client, options)
    assert [k.name for k in kinds] == ["RayJob.v1.ray.io"]


async def test_multikueue_installed_on_the_manager_stops_the_start() -> None:
    _, client = await ray_manager(multikueue=True)
    options = options_for(
        "RayJob.v1.ray.io", managed_by=(("RayJob.v1.ray.io", "kueue.x-k8s.io/multikueue"),)
    )
    async with client:
        with pytest.raises(runner.ConfigurationError, match="Kueue's MultiKueue is installed"):
            await runner.resolve_kinds(client, options)
        # A kind under jobrelay's own value is no business of MultiKueue's.
        assert await runner.resolve_kinds(client, options_for("Job.v1.batch"))


async def test_a_field_flag_for_an_adapters_kind_or_an_unnamed_kind_stops_the_start() -> None:
    _, client = await ray_manager(multikueue=False)
    async with client:
        with pytest.raises(runner.ConfigurationError, match=r"keeps managedBy at spec\.runPolicy"):
            await runner.resolve_kinds(
                client,
                options_for(
                    "PyTorchJob.v1.kubeflow.org",
                    managed_by_fields=(("PyTorchJob.v1.kubeflow.org", "spec.managedBy"),),
                ),
            )
        with pytest.raises(runner.ConfigurationError, match="name the kind with --kind too"):
            await runner.resolve_kinds(
                client,
                options_for(
                    "Job.v1.batch",
                    managed_by_fields=(("Mouse.v1.example.com", "spec.runPolicy.managedBy"),),
                ),
            )


async def test_a_manager_older_than_jobrelay_supports_stops_the_start_in_one_line() -> None:
    served = {"jobrelay.dev/v1alpha1": WORKER_CLUSTERS}
    cluster = FakeCluster("manager", served=served, git_version="v1.31.9-gke.100")
    async with cluster.client() as client:
        with pytest.raises(runner.ConfigurationError) as refused:
            await crd_checks.check_manager(client, ControllerOptions())
    message = str(refused.value)
    assert message.startswith("the management cluster runs Kubernetes v1.31.9-gke.100; ")
    assert "jobrelay needs 1.32 or later" in message and "\n" not in message
    assert not [path for _, path, _ in cluster.requests if path.startswith("/apis")]
    supported = FakeCluster("manager", served=served, git_version="v1.32.0")
    async with supported.client() as client:
        await crd_checks.check_manager(client, ControllerOptions())
