"""The ecosystem's batch kinds dispatched for real: KubeRay's RayJob and RayCluster,
Kubeflow Trainer's TrainJob, the training operator's PyTorchJob and the MPI operator's
MPIJob v2beta1, with their real CRDs on the manager and every worker (the apiservers judge
every object jobrelay writes, managedBy rules included).

The controller claims each kind under the value KubeRay's and Trainer's CRDs accept
besides their own, ``kueue.x-k8s.io/multikueue`` (borrowed: see the README's kinds
section); the Kubeflow v1 and MPI kinds keep it at ``spec.runPolicy.managedBy``. The real
operators cannot run on KWOK's simulated nodes, so each cluster runs the stand-in
operators (``python -m jobrelay.localfleet.standin``, a process per cluster, by PID): on
the workers they drive the mirrors (no managedBy) through the upstream lifecycles; on the
manager they must leave the management objects (managed by the borrowed value) alone.
How a run ends and how long it takes are the ``standin.jobrelay.dev/`` annotations, which
reach the mirror with the others.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.kinds.trainjob import SUSPENDED
from jobrelay.kube.client import ApiClient
from tests.e2e.support import (
    ControllerProcess,
    Relay,
    assert_dispatched_once_and_cleaned,
    assert_origin_marks,
    outlast,
    placement,
    wall_clock_past,
)
from tests.ecosystem import BY_KIND, ecosystem_kinds, managed_by, manifest, suspend_patch
from tests.kubetools import is_true

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e
__all__ = ["ecosystem_kinds"]  # the session fixture, imported for this module

BORROWED = "kueue.x-k8s.io/multikueue"
KIND_FLAGS = {
    "RayJob": "RayJob.v1.ray.io",
    "RayCluster": "RayCluster.v1.ray.io",
    "TrainJob": "TrainJob.v1alpha1.trainer.kubeflow.org",
    "PyTorchJob": "PyTorchJob.v1.kubeflow.org",
    "MPIJob": "MPIJob.v2beta1.kubeflow.org",
}
CONTROLLER_ARGS = [arg for flag in KIND_FLAGS.values() for arg in ("--kind", f"{flag}={BORROWED}")]
JOB_KINDS = ["RayJob", "TrainJob", "PyTorchJob", "MPIJob"]
ALL_KINDS = [*JOB_KINDS, "RayCluster"]
Obj = dict[str, Any]


# -- how each kind says where it stands ------------------------------------------------


def true_conditions(obj: Mapping[str, Any]) -> set[str]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


def finished_as(obj: Mapping[str, Any]) -> str | None:
    """``Succeeded``, ``Failed``, or None while it has not finished (a RayCluster never)."""
    kind, status = obj["kind"], obj.get("status") or {}
    if kind == "RayJob":
        deployment = status.get("jobDeploymentStatus") or ""
        return {"Complete": "Succeeded", "Failed": "Failed"}.get(deployment)
    if kind == "RayCluster":
        return None
    true = true_conditions(obj)
    if kind == "TrainJob":
        return "Succeeded" if "Complete" in true else "Failed" if "Failed" in true else None
    return next((end for end in ("Succeeded", "Failed") if end in true), None)


def is_finished(obj: Mapping[str, Any]) -> bool:
    return finished_as(obj) is not None


def shows_running(obj: Mapping[str, Any]) -> bool:
    """The running state as the kind's status writes it (TrainJob v2.0.0 writes none)."""
    kind, status = obj["kind"], obj.get("status") or {}
    if kind == "RayJob":
        return status.get("jobDeploymentStatus") == "Running"
    if kind == "RayCluster":
        return status.get("state") == "ready"
    if kind == "TrainJob":
        return bool(placement(obj)) and not is_finished(obj) and not is_suspended(obj)
    return "Running" in true_conditions(obj)


def is_suspended(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status") or {}
    if obj["kind"] == "RayJob":
        return status.get("jobDeploymentStatus") == "Suspended"
    if obj["kind"] == "RayCluster":
        return status.get("state") == "suspended" and is_true(obj, "RayClusterSuspended")
    return "Suspended" in true_conditions(obj)


# -- the stand-in operators, a process per cluster -------------------------------------


class StandinProcess:
    """``python -m jobrelay.localfleet.standin`` on one cluster, stopped by PID."""

    def __init__(self, kubeconfig: Path, cluster: str, log_path: Path) -> None:
        self.cluster = cluster
        self.log_path = log_path
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jobrelay.localfleet.standin",
                 "--kubeconfig", str(kubeconfig), "--cluster", cluster],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def wait_ready(self, timeout: float = 60) -> None:
        for _ in range(int(timeout * 5)):
            if self.process.poll() is not None:
                raise AssertionError(f"stand-in on {self.cluster} exited: {self.log()[-2000:]}")
            if "stand-in ready" in self.log():
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"stand-in on {self.cluster} not ready: {self.log()[-2000:]}")

    def problems(self) -> list[str]:
        lines = self.log().splitlines()
        bad = [line for line in lines if "Traceback" in line or "status refused" in line]
        if self.process.poll() is not None:
            bad.append(f"exited with code {self.process.returncode}")
        return bad

    async def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(self.process.wait, 30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait, 10)
            raise AssertionError(f"stand-in on {self.cluster} ignored SIGTERM") from None
        assert code == 0, f"stand-in on {self.cluster} exited with {code}: {self.log()[-2000:]}"


@pytest.fixture(scope="module", autouse=True)
async def standin_operators(
    ecosystem_kinds: list[str], fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, StandinProcess]]:
    """The CRDs everywhere, then a stand-in per cluster, before the controller starts
    (autouse module fixtures come first); stopped after it."""
    logs = tmp_path_factory.mktemp("standin")
    started = {
        name: StandinProcess(fleet.kubeconfig(name), name, logs / f"{name}.log")
        for name in fleet.clusters
    }
    try:
        for process in started.values():
            await process.wait_ready()
        yield started
    finally:
        for process in started.values():
            await process.stop()


@pytest.fixture(autouse=True)
def _standins_healthy(standin_operators: dict[str, StandinProcess]) -> Iterator[None]:
    yield
    problems = [f"{name}: {p}" for name, s in standin_operators.items() for p in s.problems()]
    assert not problems, "\n".join(problems)


RelayFor = Callable[[str], Awaitable[Relay]]


@pytest.fixture
async def relay_for(
    controller: ControllerProcess, fleet: FleetHandle, clients: dict[str, ApiClient], namespace: str
) -> AsyncIterator[RelayFor]:
    """``await relay_for(kind)``: a Relay watching that kind in the test's namespace."""
    opened: list[Relay] = []

    async def make(kind: str) -> Relay:
        relay = Relay(
            clients, fleet.workers, namespace, controller,
            resource=BY_KIND[kind].resource, is_finished=is_finished,
        )  # fmt: skip
        await relay.__aenter__()
        opened.append(relay)
        return relay

    yield make
    for relay in opened:
        await relay.__aexit__(None, None, None)


# -- checks ----------------------------------------------------------------------------


async def submit(relay: Relay, kind: str, name: str, **kwargs: Any) -> Obj:
    """Create ``name`` on the manager under the borrowed managedBy value."""
    return await relay.submit(manifest(kind, name, managed_by=BORROWED, **kwargs), managed=False)


async def set_suspend(relay: Relay, kind: str, name: str, suspend: bool) -> None:
    await relay.manager.patch(
        BY_KIND[kind].resource, name, suspend_patch(kind, suspend), namespace=relay.namespace
    )


def without_managed_by(obj: Mapping[str, Any]) -> Obj:
    spec: Obj = {k: v for k, v in (obj.get("spec") or {}).items() if k != "managedBy"}
    if isinstance(spec.get("runPolicy"), dict):
        spec["runPolicy"] = {k: v for k, v in spec["runPolicy"].items() if k != "managedBy"}
    return spec


def assert_accepted_mirror(mirror: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    """The origin marks and annotations; no managedBy at the kind's field (or the one its
    CRD defaults, which is the operator's own); the spec otherwise the management one's."""
    assert_origin_marks(mirror, obj)
    annotations = mirror["metadata"].get("annotations") or {}
    assert annotations.get("note") == obj["metadata"]["name"], annotations
    assert annotations.get("standin.jobrelay.dev/outcome"), annotations
    kind = BY_KIND[obj["kind"]]
    assert managed_by(mirror) in (None, kind.own_manager), managed_by(mirror)
    assert managed_by(obj) == BORROWED, managed_by(obj)
    assert without_managed_by(mirror) == without_managed_by(obj)


def status_problems(relay: Relay, uid: str, cluster: str) -> list[str]:
    """Every status the management object showed is one its mirror had. A TrainJob's
    Suspended condition is the exception: its own ``spec.suspend`` decides it
    (``kinds/trainjob.py``), so it may show before the mirror's operator writes its own,
    with jobrelay's time; it is left out on both sides."""
    ours = _without_suspended if relay.resource.kind == "TrainJob" else _as_is
    mirror_statuses = [
        ours(o.get("status") or {}) for o in relay.mirror_versions(uid).get(cluster, [])
    ]
    problems = []
    for version in relay.jobs.versions(uid):
        status = version.get("status") or {}
        if status and ours(status) not in mirror_statuses:
            rv = version["metadata"].get("resourceVersion")
            problems.append(f"rv {rv}: status {status} is no status the mirror ever had")
    return problems


def _as_is(status: Obj) -> Obj:
    return status


def _without_suspended(status: Obj) -> Obj:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != SUSPENDED]
    rest = {key: value for key, value in status.items() if key != "conditions"}
    return {**rest, "conditions": conditions} if conditions else rest


async def finished_and_cleaned(relay: Relay, name: str, outcome: str) -> tuple[Obj, str, Obj]:
    """Finished with ``outcome``, its final status the mirror's, every status on the way
    one of the mirror's, dispatched once and the mirror deleted after."""
    obj = await relay.wait_finished(name, timeout=90)
    assert finished_as(obj) == outcome, obj.get("status")
    cluster = placement(obj)
    assert cluster in relay.workers, cluster
    uid = obj["metadata"]["uid"]
    mirror_cluster, mirror = await relay.final_mirror(uid)
    assert mirror_cluster == cluster
    assert_accepted_mirror(mirror, obj)
    assert obj["status"] == mirror["status"], f"{obj['status']} != {mirror['status']}"
    assert not (problems := status_problems(relay, uid, cluster)), problems
    await assert_dispatched_once_and_cleaned(relay, obj, cluster)
    return obj, cluster, mirror


# -- tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", JOB_KINDS)
async def test_dispatched_shows_running_and_succeeds(relay_for: RelayFor, kind: str) -> None:
    relay = await relay_for(kind)
    created = await submit(relay, kind, "ok", run_seconds=10)  # long enough to be seen
    uid = created["metadata"]["uid"]
    cluster = await relay.wait_placed("ok")
    mirror_cluster, mirror = await relay.wait_mirror(uid)
    assert mirror_cluster == cluster
    assert_accepted_mirror(mirror, created)
    live = await relay.wait("ok", shows_running, timeout=30, what="running, as the mirror")
    assert not is_finished(live), live.get("status")
    await finished_and_cleaned(relay, "ok", "Succeeded")
    versions = relay.jobs.versions(uid)
    assert any(shows_running(v) and not is_finished(v) for v in versions), "never shown running"


@pytest.mark.parametrize("kind", JOB_KINDS)
async def test_a_failed_run_ends_failed(relay_for: RelayFor, kind: str) -> None:
    relay = await relay_for(kind)
    await submit(relay, kind, "bad", outcome="Failed", run_seconds=2)
    await finished_and_cleaned(relay, "bad", "Failed")


async def test_a_raycluster_is_dispatched_becomes_ready_and_stays(relay_for: RelayFor) -> None:
    relay = await relay_for("RayCluster")
    created = await submit(relay, "RayCluster", "cluster")
    uid = created["metadata"]["uid"]
    cluster = await relay.wait_placed("cluster")
    _, mirror = await relay.wait_mirror(uid)
    assert_accepted_mirror(mirror, created)
    ready = await relay.wait("cluster", shows_running, timeout=30, what="state ready copied")
    assert true_conditions(ready) >= {"HeadPodReady", "RayClusterProvisioned"}
    await relay.settled("cluster")  # reconciled since: its status copied again, the same
    assert (await relay.get("cluster"))["status"] == ready["status"]
    assert not (problems := status_problems(relay, uid, cluster)), problems
    await relay.assert_dispatched_event(created, cluster)


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_suspend_and_resume_follow_to_the_same_mirror(
    relay_for: RelayFor, clients: dict[str, ApiClient], kind: str
) -> None:
    relay = await relay_for(kind)
    created = await submit(relay, kind, "pause", run_seconds=6)
    uid = created["metadata"]["uid"]
    await relay.wait("pause", shows_running, timeout=30, what="running")
    running_since = time.monotonic()  # or earlier: its 6 s run ends by running_since + 6
    cluster, mirror = await relay.wait_mirror(uid)
    await set_suspend(relay, kind, "pause", True)
    await relay.wait("pause", is_suspended, timeout=30, what="the mirror's suspension copied")
    now = await clients[cluster].get(BY_KIND[kind].resource, "pause", namespace=relay.namespace)
    assert now["metadata"]["uid"] == mirror["metadata"]["uid"], "the mirror was replaced"
    if kind != "RayCluster":  # a RayCluster has no end to wait for
        await outlast(running_since, 6)  # its run's end, had it not been suspended
    await relay.settled("pause")
    held = await relay.get("pause")
    assert is_suspended(held) and not is_finished(held), held.get("status")
    await set_suspend(relay, kind, "pause", False)
    if kind == "RayCluster":
        await relay.wait("pause", shows_running, timeout=30, what="ready again")
        final = await clients[cluster].get(
            BY_KIND[kind].resource, "pause", namespace=relay.namespace
        )
    else:
        _, done_on, final = await finished_and_cleaned(relay, "pause", "Succeeded")
        assert done_on == cluster, "resumed on another worker"
    assert final["metadata"]["uid"] == mirror["metadata"]["uid"], "the mirror was replaced"
    assert relay.mirror_uids(uid) == {(cluster, mirror["metadata"]["uid"])}


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_deleting_it_deletes_its_mirror(relay_for: RelayFor, kind: str) -> None:
    relay = await relay_for(kind)
    created = await submit(relay, kind, "gone", run_seconds=3600)
    uid = created["metadata"]["uid"]
    await relay.wait("gone", shows_running, timeout=30, what="running")
    await relay.wait_mirror(uid)
    await relay.manager.delete(BY_KIND[kind].resource, "gone", namespace=relay.namespace)
    await relay.wait_mirror_gone(uid, timeout=30)
    await relay.wait_gone("gone")
    assert len(relay.mirror_uids(uid)) == 1, relay.mirror_uids(uid)


@pytest.mark.parametrize("kind", JOB_KINDS)
async def test_a_controller_killed_mid_run_leaves_one_mirror_and_the_run_finishes(
    relay_for: RelayFor, controller: ControllerProcess, kind: str
) -> None:
    relay = await relay_for(kind)
    created = await submit(relay, kind, "crash", run_seconds=10)
    uid = created["metadata"]["uid"]
    await relay.wait("crash", shows_running, timeout=30, what="running")
    cluster, _ = await relay.wait_mirror(uid)
    await controller.restart(relay.manager, signal.SIGKILL)
    _, done_on, _ = await finished_and_cleaned(relay, "crash", "Succeeded")
    assert done_on == cluster
    assert len(relay.mirror_uids(uid)) == 1, relay.mirror_uids(uid)


@pytest.mark.parametrize("kind", ["RayJob", "PyTorchJob", "MPIJob"])
async def test_a_resumed_run_shows_its_new_start(relay_for: RelayFor, kind: str) -> None:
    """The operators start a resumed run anew (a new status.startTime): so does the
    management object (not the first run's start)."""
    relay = await relay_for(kind)
    created = await submit(relay, kind, "again", run_seconds=4)
    await relay.wait("again", shows_running, timeout=30, what="running")
    await set_suspend(relay, kind, "again", True)
    await relay.wait("again", is_suspended, timeout=30, what="suspended")
    first = next(v for v in relay.jobs.versions(created["metadata"]["uid"]) if shows_running(v))
    # startTime counts whole seconds: the new run must start in a later one than the first.
    await wall_clock_past(first["status"]["startTime"])
    await set_suspend(relay, kind, "again", False)
    obj = await relay.wait_finished("again", timeout=60)
    _, mirror = await relay.final_mirror(created["metadata"]["uid"])
    assert obj["status"]["startTime"] == mirror["status"]["startTime"]
    assert obj["status"]["startTime"] > first["status"]["startTime"], "the first run's start"
