"""The local fleet's life cycle on real processes: reuse, crash recovery, down, bad starts.

One small fleet (manager + 1 worker, 1 node each) of its own, separate from
the session's shared fleet, comes up once for the module. The tests run in
file order: the down test stops that fleet, and the tests after it use its
stopped state or a throwaway fleet, so that at most one fleet of this module
runs at a time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobrelay.cli.fleet import fleet as fleet_cli
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import NAMESPACES, WORKER_CLUSTERS
from jobrelay.localfleet import cluster, processes
from jobrelay.localfleet.binaries import resolver
from jobrelay.localfleet.fleet_state import FleetError, NodeShape
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.localfleet.processes import ProcessRecord
from jobrelay.localfleet.shape import MANAGER
from jobrelay.vocabulary.resource import Resource

pytestmark = pytest.mark.integration

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
KEPT_NAMESPACE = "lifecycle-kept"
# Manager and worker-1, each with etcd, apiserver, controller manager, scheduler,
# kwok and the JobSet controller.
COMPONENT_COUNT = 2 * len(cluster.COMPONENTS)


def quiet(state_dir: Path) -> LocalFleet:
    return LocalFleet(state_dir, progress=lambda _message: None)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def recorded_ports(local: LocalFleet) -> list[int]:
    return [port for state in local.clusters.values() for port in state.ports.values()]


def assert_nothing_left(records: list[ProcessRecord], ports: list[int]) -> None:
    assert records and ports
    assert [record.name for record in records if processes.is_running(record)] == []
    assert [port for port in ports if listening(port)] == []


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The state directory of the module's fleet.

    Tests read the fleet afresh from it (``quiet(small_fleet)``), since a
    restart records new processes.
    """
    state_dir = tmp_path_factory.mktemp("lifecycle")
    # A fresh event loop: no asyncio loop runs while module fixtures are set up.
    asyncio.run(quiet(state_dir).up(workers=1, node_shape=NodeShape(count=1)))
    try:
        yield state_dir
    finally:
        quiet(state_dir).down(purge=True)


async def test_up_on_a_healthy_fleet_returns_at_once(small_fleet: Path) -> None:
    before = quiet(small_fleet).all_records()
    started = time.monotonic()
    assert await quiet(small_fleet).up() is False
    # Health probes only, no start-up (which takes 5-10 s even for this small fleet).
    assert time.monotonic() - started < 4
    assert quiet(small_fleet).all_records() == before


def test_status_reports_every_component_healthy(small_fleet: Path) -> None:
    result = CliRunner().invoke(fleet_cli, ["status", "--state-dir", str(small_fleet)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count(" healthy\n") == COMPONENT_COUNT
    assert result.stdout.count(" jobset-controller ") == 2
    assert "DOWN" not in result.stdout


def test_base_port_does_not_move_a_running_fleet(small_fleet: Path) -> None:
    result = CliRunner().invoke(
        fleet_cli, ["up", "--base-port", "20000", "--state-dir", str(small_fleet)]
    )
    assert result.exit_code == 0, result.output
    assert "the fleet is already up on its recorded ports (--base-port ignored: run " in (
        result.stderr
    )
    assert "https://127.0.0.1:20002" not in result.stdout


async def test_env_exports_kubeconfigs_that_reach_each_cluster(small_fleet: Path) -> None:
    result = CliRunner().invoke(fleet_cli, ["env", "--state-dir", str(small_fleet)])
    assert result.exit_code == 0, result.output
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in result.stdout.split("\n") if line
    )
    assert set(exports) == {"KUBECONFIG", "KUBECONFIG_MANAGER", "KUBECONFIG_WORKER_1"}
    assert exports["KUBECONFIG"] == exports["KUBECONFIG_MANAGER"]
    for variable in ("KUBECONFIG_MANAGER", "KUBECONFIG_WORKER_1"):
        async with ApiClient.from_kubeconfig(exports[variable]) as client:
            await client.get(NAMESPACES, "default")


async def test_killed_apiserver_is_noticed_and_up_restarts_keeping_data(
    small_fleet: Path,
) -> None:
    before = quiet(small_fleet)
    kubeconfig = before.kubeconfig(MANAGER)
    async with ApiClient.from_kubeconfig(kubeconfig, cluster=MANAGER) as client:
        await client.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KEPT_NAMESPACE}},
        )
        await client.create(
            CONFIGMAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kept"},
                "data": {"k": "v"},
            },
            namespace=KEPT_NAMESPACE,
        )

    victim = before.clusters[MANAGER].processes["kube-apiserver"]
    os.kill(victim.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while processes.is_running(victim):
        assert time.monotonic() < deadline, "the killed apiserver is still running"
        await asyncio.sleep(0.05)

    assert await quiet(small_fleet).is_healthy() is False
    # In a thread: the command runs its own event loop, and this test's is running.
    status = await asyncio.to_thread(
        CliRunner().invoke, fleet_cli, ["status", "--state-dir", str(small_fleet)]
    )
    assert status.exit_code == 1
    assert f"DOWN kube-apiserver           not running (pid {victim.pid} gone)" in status.stdout
    assert f"1 of {COMPONENT_COUNT} components are down" in status.stderr

    messages: list[str] = []
    restarter = LocalFleet(small_fleet, progress=messages.append)
    assert await restarter.up() is True
    assert "not running: manager/kube-apiserver" in messages[0]
    assert await restarter.is_healthy()
    assert restarter.clusters[MANAGER].processes["kube-apiserver"].pid != victim.pid
    assert [state.ports for state in restarter.clusters.values()] == [
        state.ports for state in before.clusters.values()
    ]

    async with ApiClient.from_kubeconfig(kubeconfig, cluster=MANAGER) as client:
        kept = await client.get(CONFIGMAPS, "kept", namespace=KEPT_NAMESPACE)
        assert kept["data"] == {"k": "v"}
        await client.get(WORKER_CLUSTERS, "worker-1")


async def test_restart_brings_back_one_killed_component_alone(small_fleet: Path) -> None:
    await quiet(small_fleet).up()  # a no-op unless an earlier test left the fleet broken
    before = quiet(small_fleet)
    victim = before.clusters["worker-1"].processes["kube-apiserver"]
    others = [record for record in before.all_records() if record != victim]
    os.kill(victim.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while processes.is_running(victim):
        assert time.monotonic() < deadline, "the killed apiserver is still running"
        await asyncio.sleep(0.05)

    fresh = await quiet(small_fleet).restart("worker-1", "kube-apiserver")

    assert fresh.pid != victim.pid and fresh.argv == victim.argv
    after = quiet(small_fleet)
    assert after.clusters["worker-1"].processes["kube-apiserver"] == fresh
    # Nothing else was stopped or started again.
    assert [record for record in after.all_records() if record != fresh] == others
    assert all(processes.is_running(record) for record in others)
    assert await after.is_healthy()
    async with ApiClient.from_kubeconfig(after.kubeconfig("worker-1")) as client:
        await client.get(NAMESPACES, "default")
    with pytest.raises(FleetError, match="no kube-apiserver recorded for cluster 'worker-9'"):
        await after.restart("worker-9", "kube-apiserver")


async def test_down_leaves_no_recorded_process_or_port(small_fleet: Path) -> None:
    local = quiet(small_fleet)
    await local.up()  # a no-op unless an earlier test left the fleet broken
    records, ports = local.all_records(), recorded_ports(local)
    assert all(processes.is_running(record) for record in records)
    started = time.monotonic()
    stopped = local.down()
    # Stopped in reverse start order, every component exits of SIGTERM within a
    # second or two; an apiserver whose etcd went first waits out a 10 s grace.
    assert time.monotonic() - started < 8
    assert sorted(stopped) == sorted(record.name for record in records)
    assert_nothing_left(records, ports)


def test_a_recorded_port_taken_while_stopped_is_named_on_restart(small_fleet: Path) -> None:
    stopped = quiet(small_fleet)
    stopped.down()  # a no-op after test_down_leaves_no_recorded_process_or_port
    port = stopped.clusters["worker-1"].ports["apiserver"]
    with socket.socket() as squatter:
        # The fleet's own connections on this port may linger in TIME_WAIT.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(FleetError) as caught:
            asyncio.run(stopped.up())
    message = str(caught.value)
    assert f"{port} (worker-1 apiserver): listened on by pid {os.getpid()}" in message
    assert "move the fleet to other ports, keeping its data" in message
    assert stopped.running_count() == (0, 0)


def test_component_failing_at_start_stops_the_half_started_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = resolver.resolve(build=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kube-apiserver").symlink_to(real.kube_apiserver)
    (bin_dir / "kube-controller-manager").symlink_to(real.kube_controller_manager)
    scheduler = bin_dir / "kube-scheduler"
    scheduler.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "Kubernetes v1.35.4"; exit 0; fi\n'
        "echo 'fake scheduler: refusing to run' >&2\n"
        "exit 1\n"
    )
    scheduler.chmod(0o755)
    monkeypatch.setenv("JOBRELAY_K8S_BIN_DIR", str(bin_dir))

    local = quiet(tmp_path / "fleet")
    with pytest.raises(FleetError) as caught:
        asyncio.run(local.up(workers=1, node_shape=NodeShape(count=1)))
    message = str(caught.value)
    assert "/kube-scheduler exited with code 1 while starting; its log" in message
    assert "fake scheduler: refusing to run" in message
    assert "then run `jobrelay fleet up --state-dir" in message

    after = quiet(tmp_path / "fleet")
    records = after.all_records()
    # etcd and kube-apiserver came up on both clusters before the scheduler failed.
    assert {"manager/etcd", "worker-1/kube-apiserver"} <= {record.name for record in records}
    assert_nothing_left(records, recorded_ports(after))
    assert after.down() == []
