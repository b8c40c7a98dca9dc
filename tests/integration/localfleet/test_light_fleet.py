"""A fleet of light workers (`fleet up --light`): apiservers on one shared etcd, and the one
job stand-in running their Jobs as the built-in controllers would, the real apiserver
judging every status it writes.

A fleet of its own (manager and two light workers), up for this module only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobrelay.fleet import maintenance
from jobrelay.fleet.maintenance_rules import cordon_patch, uncordon_patch
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, NAMESPACES, NODES, PODS, WORKER_CLUSTERS
from jobrelay.localfleet import light, processes
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.vocabulary.names import (
    DEFAULT_CONTROLLER_NAME,
    MIRRORS_ANNOTATION,
    ORIGIN_UID_LABEL,
    RUN_ANNOTATION,
)
from jobrelay.vocabulary.placement import placements_of
from tests.e2e.support import ControllerProcess
from tests.kubetools import Obj, eventually, finished, is_true, job_manifest, wait_for

pytestmark = pytest.mark.integration

WORKERS = ("worker-1", "worker-2")


@pytest.fixture(scope="module")
def light_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    local = LocalFleet(tmp_path_factory.mktemp("light-fleet"), progress=lambda _message: None)
    try:
        asyncio.run(local.up(workers=len(WORKERS), light=True))
        yield local
    finally:
        local.down(purge=True)


def client(local: LocalFleet, name: str) -> ApiClient:
    return ApiClient.from_kubeconfig(local.kubeconfig(name), cluster=name)


def flag(argv: list[str], name: str) -> str:
    return next(arg.split("=", 1)[1] for arg in argv if arg.startswith(f"{name}="))


def standin_log(local: LocalFleet) -> str:
    return Path(local.clusters["worker-1"].processes[light.JOB_STANDIN].log).read_text()


async def pods_of(worker: ApiClient, namespace: str, job: str) -> list[dict[str, object]]:
    return (await worker.list(PODS, namespace=namespace, label_selector=f"job-name={job}")).items


async def test_light_workers_share_one_etcd_and_run_jobs(light_fleet: LocalFleet) -> None:
    # One etcd for both light workers (held in worker-1's records), each under its prefix;
    # the manager keeps its own etcd and controllers.
    states = light_fleet.clusters
    assert set(states["worker-1"].processes) == {light.ETCD, light.APISERVER, light.JOB_STANDIN}
    assert set(states["worker-2"].processes) == {light.APISERVER}
    assert "kube-controller-manager" in states["manager"].processes
    argvs = [states[name].processes[light.APISERVER].argv for name in WORKERS]
    shared_etcd = f"http://127.0.0.1:{states['worker-1'].ports['etcd-client']}"
    assert {flag(argv, "--etcd-servers") for argv in argvs} == {shared_etcd}
    assert [flag(argv, "--etcd-prefix") for argv in argvs] == [
        light.etcd_prefix(name) for name in WORKERS
    ]
    assert await light_fleet.is_healthy()
    async with client(light_fleet, "manager") as manager:
        registered = {w["metadata"]["name"] for w in (await manager.list(WORKER_CLUSTERS)).items}
    assert set(WORKERS) <= registered

    async with client(light_fleet, "worker-1") as one, client(light_fleet, "worker-2") as two:
        # Separate clusters on the one etcd: a namespace of one is not the other's.
        await one.create(NAMESPACES, {"metadata": {"name": "light-only-one"}})
        assert "light-only-one" not in {
            n["metadata"]["name"] for n in (await two.list(NAMESPACES)).items
        }
        listed = (await one.list(NODES)).items
        nodes = {n["metadata"]["name"] for n in listed}
        # Ready and untainted, as jobrelay's placement reads them (no node lifecycle
        # controller would lift a not-ready taint).
        assert len(nodes) == 2 and not [n for n in listed if n.get("spec", {}).get("taints")]
        namespace = "light-only-one"
        started = time.monotonic()
        await one.create(JOBS, job_manifest("ok", completions=3, parallelism=2),
                         namespace=namespace)  # fmt: skip
        await one.create(
            JOBS,
            job_manifest("idx", completions=3, parallelism=3, completionMode="Indexed"),
            namespace=namespace,
        )
        await one.create(
            JOBS,
            job_manifest("doomed", backoff_limit=1,
                         annotations={"fleet.jobrelay.dev/outcome": "fail"}),
            namespace=namespace,
        )  # fmt: skip
        ok = await wait_for(one, "ok", namespace, finished, timeout=30, what="finish")
        assert is_true(ok, "Complete") and is_true(ok, "SuccessCriteriaMet"), ok["status"]
        assert ok["status"]["succeeded"] == 3 and ok["status"].get("active", 0) == 0
        assert ok["status"]["startTime"] <= ok["status"]["completionTime"]
        ran = await pods_of(one, namespace, "ok")
        assert len(ran) == 3 and {p["spec"]["nodeName"] for p in ran} <= nodes  # type: ignore[index]
        assert {p["status"]["phase"] for p in ran} == {"Succeeded"}  # type: ignore[index]

        indexed = await wait_for(one, "idx", namespace, finished, timeout=30, what="finish")
        assert is_true(indexed, "Complete"), indexed["status"]
        assert indexed["status"]["completedIndexes"] == "0-2"

        doomed = await wait_for(one, "doomed", namespace, finished, timeout=30, what="finish")
        failed = next(c for c in doomed["status"]["conditions"] if c["type"] == "Failed")
        assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded"
        assert doomed["status"]["failed"] == 2
        assert time.monotonic() - started < 30

        # No garbage collector on a light worker: the stand-in deletes a deleted Job's pods.
        await one.delete(JOBS, "ok", namespace=namespace)
        deadline = time.monotonic() + 20
        while await pods_of(one, namespace, "ok"):
            assert time.monotonic() < deadline, "the deleted Job's pods stayed"
            await asyncio.sleep(0.2)

    # Every status the stand-in wrote, the apiserver took (a refusal is logged).
    log = standin_log(light_fleet)
    assert "refused" not in log and "Traceback" not in log, log[-3000:]


# Lost fast: probed every half second, not connected after 3 s, lost 5 s later.
LOST_ARGS = ("--worker-health-timeout", "3", "--worker-lost-timeout", "5",
             "--finished-mirror-ttl", "1h")  # fmt: skip


async def set_spec(manager: ApiClient, worker: str, patch: Obj) -> None:
    """Patch a WorkerCluster's spec and wait until the controller has seen it."""
    generation = int(
        (await maintenance.patch_spec(manager, worker, patch))["metadata"]["generation"]
    )

    async def observed() -> bool:
        status = (await manager.get(WORKER_CLUSTERS, worker)).get("status") or {}
        return int(status.get("observedGeneration") or 0) >= generation

    await eventually(observed, timeout=30, interval=0.2, what=f"{worker}: {patch} observed")


async def mirrors_on(worker: ApiClient, namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Management Job UID -> (uid, run) of each of its mirrors on ``worker``."""
    found: dict[str, list[tuple[str, str]]] = {}
    for mirror in (await worker.list(JOBS, namespace=namespace)).items:
        meta = mirror["metadata"]
        origin = (meta.get("labels") or {}).get(ORIGIN_UID_LABEL)
        if origin:
            run = (meta.get("annotations") or {}).get(RUN_ANNOTATION, "")
            found.setdefault(origin, []).append((meta["uid"], run))
    return found


def mirror_runs(job: Obj) -> list[tuple[str, ...]]:
    """The mirrors annotation: (run, worker, mirror uid) of every mirror jobrelay made."""
    text = (job["metadata"].get("annotations") or {}).get(MIRRORS_ANNOTATION) or ""
    return [tuple(item.split(":", 2)) for item in text.split(",") if item]


async def test_a_lost_light_worker_s_jobs_run_once_more_elsewhere_and_never_twice(
    light_fleet: LocalFleet, tmp_path: Path
) -> None:
    """worker-2's kube-apiserver stopped (SIGSTOP by its recorded PID) under two running
    Jobs: it turns Lost, both Jobs run again on worker-1 and Complete there, each with
    exactly one mirror per run and one pod on worker-1; continued, its stale mirrors are deleted, and no Job
    counts more than one success."""
    keep, doomed = WORKERS
    controller = ControllerProcess(
        light_fleet.kubeconfig("manager"), tmp_path / "controller.log",
        workers=WORKERS, extra_args=LOST_ARGS,
    )  # fmt: skip
    namespace = "lost-light"
    record = light_fleet.clusters[doomed].processes[light.APISERVER]
    async with (
        client(light_fleet, "manager") as manager,
        client(light_fleet, keep) as kept,
        client(light_fleet, doomed) as lost,
    ):
        await controller.start(manager)
        frozen = False
        try:
            await controller.wait_ready(manager)
            await manager.create(NAMESPACES, {"metadata": {"name": namespace}})
            # Both Jobs onto the worker to lose: the other cordoned while they are placed.
            await set_spec(manager, keep, cordon_patch())
            names = ("long-a", "long-b")
            for name in names:
                await manager.create(
                    JOBS,
                    job_manifest(name, managed_by=DEFAULT_CONTROLLER_NAME,
                                 annotations={"fleet.jobrelay.dev/duration": "15s"}),
                    namespace=namespace,
                )  # fmt: skip

            async def running_on_doomed() -> bool:
                jobs = (await manager.list(JOBS, namespace=namespace)).items
                return len(jobs) == 2 and all(
                    placements_of(j) == (doomed,) and (j.get("status") or {}).get("active")
                    for j in jobs
                )

            await eventually(running_on_doomed, timeout=30, interval=0.3,
                             what=f"both Jobs running on {doomed}")  # fmt: skip
            await set_spec(manager, keep, uncordon_patch())
            first = await mirrors_on(lost, namespace)
            assert sorted(len(m) for m in first.values()) == [1, 1], first

            assert processes.is_running(record), record
            os.kill(record.pid, signal.SIGSTOP)
            frozen = True

            async def lost_time() -> str | None:
                found = await manager.get(WORKER_CLUSTERS, doomed)
                return (found.get("status") or {}).get("lostTime")

            await eventually(lost_time, timeout=30, interval=0.3, what=f"{doomed} Lost")

            async def moved_and_complete() -> list[Obj] | None:
                jobs = (await manager.list(JOBS, namespace=namespace)).items
                done = all(placements_of(j) == (doomed, keep) and is_true(j, "Complete")
                           for j in jobs)  # fmt: skip
                return jobs if done else None

            jobs = await eventually(moved_and_complete, timeout=45, interval=0.5,
                                    what=f"both Jobs run again on {keep} and Complete")  # fmt: skip
        finally:
            if frozen and processes.is_running(record):
                os.kill(record.pid, signal.SIGCONT)
            await maintenance.patch_spec(manager, keep, uncordon_patch())

        try:
            # One mirror per run, the second on the kept worker; one success each. A
            # mirror is recorded only once it ran 30 s: records, where written, agree.
            second = await mirrors_on(kept, namespace)
            for job in jobs:
                uid = job["metadata"]["uid"]
                (one,), (two,) = first[uid], second[uid]
                assert (one[1], two[1]) == ("1", "2"), (one, two)
                expected = {("1", doomed, one[0]), ("2", keep, two[0])}
                assert set(mirror_runs(job)) <= expected, (mirror_runs(job), expected)
                assert job["status"]["succeeded"] == 1, job["status"]
                name = job["metadata"]["name"]
                pods = (await kept.list(PODS, namespace=namespace,
                                        label_selector=f"job-name={name}")).items  # fmt: skip
                assert len(pods) == 1, pods

            # Continued: the lost worker's stale mirrors are deleted, whatever they show.
            async def stale_gone() -> bool:
                left = (await lost.list(JOBS, namespace=namespace)).items
                return not [
                    m for m in left if (m["metadata"].get("labels") or {}).get(ORIGIN_UID_LABEL)
                ]

            await eventually(stale_gone, timeout=30, interval=0.5,
                             what=f"the stale mirrors on {doomed} deleted")  # fmt: skip
        finally:
            await controller.stop()
