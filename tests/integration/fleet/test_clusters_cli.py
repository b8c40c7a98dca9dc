"""`jobrelay clusters cordon|uncordon|drain|remove` as a user runs them, against the real fleet.

No controller runs here: the test writes ``status.activeMirrors`` through the
status subresource, as the controller would, and creates the "mirrors" on the
worker itself (suspended, so nothing runs). Each test registers a worker of its
own (pointing at worker-1) and mirrors of a controller name of its own, so it
never touches what other tests or a running controller own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, SECRETS, WORKER_CLUSTERS
from jobrelay.vocabulary.names import MIRROR_LABEL, ORIGIN_LABEL, controller_label_value
from jobrelay.vocabulary.resource import Resource
from tests.kubetools import eventually, gone

pytestmark = pytest.mark.integration

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
NAMESPACE = workerclusters.DEFAULT_NAMESPACE
CLI_TIMEOUT = 60.0


@dataclass
class Cli:
    """``python -m jobrelay clusters ...`` on the fleet's manager, as a child process."""

    manager_kubeconfig: Path

    def argv(self, *args: str) -> list[str]:
        return [
            sys.executable, "-m", "jobrelay", "clusters", *args,
            "--manager-kubeconfig", str(self.manager_kubeconfig),
        ]  # fmt: skip

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KUBECONFIG", None)
        return await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )

    async def run(self, *args: str) -> tuple[int, str, str]:
        process = await self.start(*args)
        async with asyncio.timeout(CLI_TIMEOUT):
            stdout, stderr = await process.communicate()
        assert process.returncode is not None
        return process.returncode, stdout.decode(), stderr.decode()


@pytest.fixture
def cli(fleet: Any) -> Cli:
    return Cli(fleet.kubeconfig("manager"))


@pytest.fixture
def controller_name() -> str:
    """A controller name of this test's own: its mirror label touches nothing else."""
    return f"clitest-{uuid.uuid4().hex[:6]}.jobrelay.dev/relay"


@pytest.fixture
async def worker_name(cli: Cli, fleet: Any, clients: dict[str, ApiClient]) -> AsyncIterator[str]:
    """A worker registered with `clusters add` (worker-1's kubeconfig), gone afterwards."""
    name = f"cli-{uuid.uuid4().hex[:6]}"
    code, out, err = await cli.run("add", name, "--kubeconfig", str(fleet.kubeconfig("worker-1")))
    assert code == 0, out + err
    try:
        yield name
    finally:
        await workerclusters.unregister(clients["manager"], name, namespace=NAMESPACE)


async def write_active_mirrors(manager: ApiClient, name: str, count: int) -> None:
    """What the controller's status write looks like (status subresource, merge patch)."""
    await manager.patch(
        WORKER_CLUSTERS, name, {"status": {"activeMirrors": count}}, subresource="status"
    )


def suspended_job(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }


async def test_cordon_and_uncordon(
    cli: Cli, worker_name: str, clients: dict[str, ApiClient]
) -> None:
    manager = clients["manager"]
    code, out, err = await cli.run("cordon", worker_name)
    assert code == 0, err
    assert f"worker cluster {worker_name} cordoned" in out
    assert (await manager.get(WORKER_CLUSTERS, worker_name))["spec"]["cordoned"] is True

    code, out, err = await cli.run("cordon", worker_name)
    assert (code, out) == (
        0,
        f"worker cluster {worker_name} was already cordoned: nothing changed\n",
    )

    # The CRD takes spec.drain (its enum) and an uncordon deletes it.
    code, out, err = await cli.run("drain", worker_name, "--force", "--no-wait")
    assert code == 0, err
    spec = (await manager.get(WORKER_CLUSTERS, worker_name))["spec"]
    assert (spec["cordoned"], spec["drain"]) == (True, "All")

    code, out, err = await cli.run("uncordon", worker_name)
    assert code == 0, err
    assert "uncordoned and its drain (All) cancelled" in out
    spec = (await manager.get(WORKER_CLUSTERS, worker_name))["spec"]
    assert spec["cordoned"] is False
    assert "drain" not in spec

    code, out, err = await cli.run("list")
    assert code == 0, err
    (line,) = [row for row in out.splitlines() if row.startswith(worker_name)]
    assert line.split()[1:4] == ["Unknown", "-", "Schedulable"]  # no controller wrote a status


async def test_the_crd_rejects_an_unknown_drain_mode(
    worker_name: str, clients: dict[str, ApiClient]
) -> None:
    with pytest.raises(ApiError) as refused:
        await clients["manager"].patch(WORKER_CLUSTERS, worker_name, {"spec": {"drain": "Some"}})
    assert refused.value.is_invalid
    assert 'supported values: "NotStarted", "All"' in refused.value.message


async def test_drain_waits_for_the_controllers_count_to_reach_zero(
    cli: Cli, worker_name: str, clients: dict[str, ApiClient]
) -> None:
    manager = clients["manager"]
    await write_active_mirrors(manager, worker_name, 2)
    process = await cli.start("drain", worker_name, "--timeout", str(CLI_TIMEOUT))
    assert process.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(CLI_TIMEOUT):
        while "2 unfinished mirrors left" not in (lines[-1] if lines else ""):
            lines.append((await process.stdout.readline()).decode().rstrip())
            assert lines[-1] or process.returncode is None, lines
    spec = (await manager.get(WORKER_CLUSTERS, worker_name))["spec"]
    assert (spec["cordoned"], spec["drain"]) == (True, "NotStarted")

    await write_active_mirrors(manager, worker_name, 0)
    async with asyncio.timeout(CLI_TIMEOUT):
        rest, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert rest.decode().splitlines() == [
        f"worker cluster {worker_name} is drained: no unfinished mirrors remain",
        f"`jobrelay clusters remove {worker_name}` removes it",
    ]


async def test_drain_timeout_exits_1_and_keeps_the_drain(
    cli: Cli, worker_name: str, clients: dict[str, ApiClient]
) -> None:
    await write_active_mirrors(clients["manager"], worker_name, 1)
    code, out, err = await cli.run("drain", worker_name, "--timeout", "0.5")
    assert code == 1
    assert f"worker cluster {worker_name}: 1 unfinished mirror left" in out
    assert "after 0.5s; the drain (NotStarted) stays in place" in err
    spec = (await clients["manager"].get(WORKER_CLUSTERS, worker_name))["spec"]
    assert spec["drain"] == "NotStarted"


async def test_remove_refuses_while_mirrors_are_unfinished_or_unknown(
    cli: Cli, worker_name: str, clients: dict[str, ApiClient]
) -> None:
    code, _, err = await cli.run("remove", worker_name)
    assert code == 1
    assert "the controller never reported them (no status.activeMirrors)" in err

    await write_active_mirrors(clients["manager"], worker_name, 2)
    code, _, err = await cli.run("remove", worker_name)
    assert code == 1
    assert (
        f"worker cluster {worker_name} has 2 unfinished mirrors: run `jobrelay clusters drain"
        in err
    )
    assert f"`jobrelay clusters remove {worker_name} --force`" in err
    assert (await clients["manager"].get(WORKER_CLUSTERS, worker_name))["spec"]["cordoned"] is False


async def test_remove_force_leaves_no_mirror_behind(
    cli: Cli,
    worker_name: str,
    controller_name: str,
    namespace: str,
    clients: dict[str, ApiClient],
) -> None:
    manager, worker = clients["manager"], clients["worker-1"]
    await write_active_mirrors(manager, worker_name, 0)
    # No controller published its origin: the manager's own identity is the default.
    origin = await workerclusters.default_origin(manager)
    ours = {MIRROR_LABEL: controller_label_value(controller_name), ORIGIN_LABEL: origin}
    await worker.create(JOBS, suspended_job("leftover", namespace, ours))
    await worker.create(JOBS, suspended_job("not-a-mirror", namespace, {}))
    # Another management cluster's mirror on the same worker: never touched.
    theirs = {**ours, ORIGIN_LABEL: "another-manager"}
    await worker.create(JOBS, suspended_job("another-managers", namespace, theirs))
    await worker.create(
        JOBSETS,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "leftover-set", "namespace": namespace, "labels": ours},
            # Managed by nobody on this worker: its JobSet controller creates nothing.
            "spec": {"managedBy": "clitest.jobrelay.dev/nobody", "suspend": True,
                     "replicatedJobs": [{"name": "r", "template": suspended_job("t", namespace, {})}]},
        },
    )  # fmt: skip

    code, out, err = await cli.run(
        "remove", worker_name, "--force", "--controller-name", controller_name,
        "--kind", "Job.v1.batch", "--kind", "JobSet.v1alpha2.jobset.x-k8s.io",
    )  # fmt: skip
    assert code == 0, out + err
    assert out.splitlines() == [
        f"--force: draining worker cluster {worker_name} with All before removing it",
        f"worker cluster {worker_name} is drained: no unfinished mirrors remain",
        f"worker cluster {worker_name}: deleted 1 Job.v1.batch, "
        "1 JobSet.v1alpha2.jobset.x-k8s.io mirror(s)",
        f"removed worker cluster {worker_name} (its WorkerCluster and Secret "
        f"{NAMESPACE}/{workerclusters.secret_name(worker_name)})",
    ]
    await eventually(lambda: gone(worker, JOBS, "leftover", namespace), what="mirror Job deleted")
    await eventually(
        lambda: gone(worker, JOBSETS, "leftover-set", namespace), what="mirror JobSet deleted"
    )
    assert await worker.get(JOBS, "not-a-mirror", namespace=namespace)
    assert await worker.get(JOBS, "another-managers", namespace=namespace)
    assert await gone(manager, WORKER_CLUSTERS, worker_name, None)
    assert await gone(manager, SECRETS, workerclusters.secret_name(worker_name), NAMESPACE)


async def test_remove_of_a_worker_it_cannot_clean_needs_force(
    cli: Cli, fleet: Any, controller_name: str, clients: dict[str, ApiClient], tmp_path: Path
) -> None:
    # worker-1's address and CA, but a token its apiserver refuses.
    kubeconfig = workerclusters.inline_kubeconfig(fleet.kubeconfig("worker-1"))
    kubeconfig["users"][0]["user"] = {"token": "not-a-valid-token"}
    path = tmp_path / "refused.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    name = f"cli-{uuid.uuid4().hex[:6]}"
    code, out, err = await cli.run("add", name, "--kubeconfig", str(path))
    assert code == 0, out + err
    manager = clients["manager"]
    try:
        await write_active_mirrors(manager, name, 0)
        code, _, err = await cli.run("remove", name, "--controller-name", controller_name)
        assert code == 1
        assert "cannot delete its mirrors (Unauthorized:" in err
        assert "nothing was removed and it stays cordoned" in err
        assert not await gone(manager, WORKER_CLUSTERS, name, None)

        code, out, err = await cli.run(
            "remove", name, "--force", "--controller-name", controller_name
        )
        assert code == 0, out + err
        assert "so some may remain. Removing it anyway (--force)" in out
        assert (
            "kubectl --kubeconfig WORKER-KUBECONFIG delete Job.v1.batch --all-namespaces "
            f"-l {MIRROR_LABEL}={controller_label_value(controller_name)},{ORIGIN_LABEL}="
        ) in out
        assert await gone(manager, WORKER_CLUSTERS, name, None)
    finally:
        with contextlib.suppress(ApiError):
            await workerclusters.unregister(manager, name, namespace=NAMESPACE)
