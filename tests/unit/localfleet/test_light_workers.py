"""Light workers without real clusters: what each records and runs, their command lines,
and the fleet commands' refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
from click.testing import CliRunner

from jobrelay.cli.fleet import fleet as fleet_cli
from jobrelay.localfleet import cluster, light
from jobrelay.localfleet.binaries.resolver import Binaries
from jobrelay.localfleet.cluster_files import ClusterFiles
from jobrelay.localfleet.fleet_state import ClusterState, FleetError
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.localfleet.startup import components_of, health_url, light_host


def quiet(state_dir: Path) -> LocalFleet:
    return LocalFleet(state_dir, progress=lambda _message: None)


def test_light_workers_are_recorded_and_run_only_their_part(tmp_path: Path) -> None:
    fleet = quiet(tmp_path)
    fleet._assign_ports(["manager", "worker-1", "worker-2"], 0, light=True)
    loaded = quiet(tmp_path)
    assert [state.light for state in loaded.clusters.values()] == [False, True, True]
    assert light_host(loaded.clusters) == "worker-1"
    assert components_of("manager", loaded.clusters) == cluster.COMPONENTS
    assert components_of("worker-1", loaded.clusters) == (
        light.ETCD, light.APISERVER, light.JOB_STANDIN,
    )  # fmt: skip
    assert components_of("worker-2", loaded.clusters) == (light.APISERVER,)
    # The stand-in has no health endpoint: its process running is its health.
    assert health_url(loaded.clusters["worker-1"], light.JOB_STANDIN) is None
    assert sorted(loaded.not_running()) == sorted(
        ["manager/" + c for c in cluster.COMPONENTS]
        + ["worker-1/etcd", "worker-1/kube-apiserver", "worker-1/job-standin",
           "worker-2/kube-apiserver"]
    )  # fmt: skip


def test_a_light_apiserver_runs_on_the_shared_etcd_under_its_prefix(tmp_path: Path) -> None:
    full = cluster.commands(
        ClusterFiles(tmp_path, "worker-2"),
        binaries=_binaries(tmp_path),
        ca=tmp_path / "ca.crt",
        ports=dict.fromkeys(cluster.PORT_NAMES, 30000),
    )
    commands = light.light_commands(
        full, worker="worker-2", host=None, etcd_client_port=41000,
        standin_kubeconfigs={"worker-2": tmp_path / "w2.kubeconfig"},
    )  # fmt: skip
    assert set(commands) == {light.APISERVER}
    argv = commands[light.APISERVER]
    assert argv[1:3] == ["GOMAXPROCS=1", "GOGC=50"] and argv[3] == full["kube-apiserver"][0]
    assert "--etcd-servers=http://127.0.0.1:41000" in argv
    assert "--etcd-prefix=/registry-light/worker-2" in argv
    # Each replaced flag once: the light value, not the full one's besides.
    names = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]
    assert len(names) == len(set(names))
    hosting = light.light_commands(
        full, worker="worker-1", host=ClusterFiles(tmp_path, "worker-1"),
        etcd_client_port=41000, standin_kubeconfigs={"worker-1": tmp_path / "w1.kubeconfig"},
    )  # fmt: skip
    assert set(hosting) == {light.ETCD, light.APISERVER, light.JOB_STANDIN}
    assert hosting[light.JOB_STANDIN][-2:] == [
        "--cluster",
        f"worker-1={tmp_path / 'w1.kubeconfig'}",
    ]


def _binaries(tmp_path: Path) -> Binaries:
    class Named:
        def __getattr__(self, name: str) -> Path:
            return tmp_path / name

    return cast(Binaries, Named())


def test_a_recorded_full_fleet_is_not_brought_back_light(tmp_path: Path) -> None:
    quiet(tmp_path)._assign_ports(["manager", "worker-1"], 0)
    with pytest.raises(FleetError, match="has full workers"):
        asyncio.run(quiet(tmp_path).up(light=True))


def test_more_than_twenty_workers_need_light(tmp_path: Path) -> None:
    result = CliRunner().invoke(fleet_cli, ["up", "--workers", "32", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2 and "add --light" in result.output
    assert not (tmp_path / "state.json").exists()


def test_state_json_records_lightness(tmp_path: Path) -> None:
    state = ClusterState("worker-1", {"apiserver": 1}, light=True)
    assert ClusterState.from_json("worker-1", state.to_json()) == state
    assert "light" not in ClusterState("manager", {"apiserver": 1}).to_json()


@pytest.mark.parametrize(
    ("workers", "limit", "refused"),
    [(32, 128, False), (39, 128, False), (40, 128, True), (64, 512, False), (64, None, False)],
)
def test_the_inotify_limit_bounds_light_workers(
    workers: int, limit: int | None, refused: bool
) -> None:
    shortfall = light.inotify_shortfall(workers, limit)
    assert (shortfall is not None) == refused
    if shortfall:
        assert "at most 39" in shortfall and "fs.inotify.max_user_instances" in shortfall


def test_a_light_apiserver_has_no_aggregation_layer(tmp_path: Path) -> None:
    full = cluster.commands(
        ClusterFiles(tmp_path, "worker-1"), binaries=_binaries(tmp_path),
        ca=tmp_path / "ca.crt", ports=dict.fromkeys(cluster.PORT_NAMES, 30000),
    )  # fmt: skip
    argv = light.apiserver_command(full["kube-apiserver"], worker="worker-1", etcd_client_port=1)
    assert not [arg for arg in argv if "requestheader" in arg or "proxy-client" in arg]
    assert f"--client-ca-file={tmp_path / 'ca.crt'}" in argv


def test_a_light_apiserver_serves_every_built_in_group_jobrelay_uses(tmp_path: Path) -> None:
    """Light apiservers serve only SERVED_API_GROUPS: each built-in resource jobrelay
    reaches (kube/resources.py) must be among them, or it would find none on a light
    worker."""
    from jobrelay.kube import resources
    from jobrelay.vocabulary.resource import Resource

    full = cluster.commands(
        ClusterFiles(tmp_path, "worker-1"), binaries=_binaries(tmp_path),
        ca=tmp_path / "ca.crt", ports=dict.fromkeys(cluster.PORT_NAMES, 30000),
    )  # fmt: skip
    argv = light.apiserver_command(full["kube-apiserver"], worker="worker-1", etcd_client_port=1)
    [runtime_config] = [arg for arg in argv if arg.startswith("--runtime-config=")]
    served = runtime_config.removeprefix("--runtime-config=").split(",")
    assert served[0] == "api/all=false"
    built_in = [
        value
        for value in vars(resources).values()
        if isinstance(value, Resource)
        and value.version
        and (value.group in ("", "batch") or value.group.endswith(".k8s.io"))
    ]
    assert len(built_in) >= 15
    for resource in built_in:
        group_version = f"{resource.group}/{resource.version}" if resource.group else "api/v1"
        assert f"{group_version}=true" in served, resource.name
