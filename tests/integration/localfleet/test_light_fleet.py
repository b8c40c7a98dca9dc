"""A fleet of light workers (`fleet up --light`): apiservers on one shared etcd, and the one
job stand-in running their Jobs as the built-in controllers would, the real apiserver
judging every status it writes.

A fleet of its own (manager and two light workers), up for this module only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, NAMESPACES, NODES, PODS, WORKER_CLUSTERS
from jobrelay.localfleet import light
from jobrelay.localfleet.orchestration import LocalFleet
from tests.kubetools import finished, is_true, job_manifest, wait_for

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
