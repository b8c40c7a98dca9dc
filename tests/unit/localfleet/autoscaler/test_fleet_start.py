"""The staged start's last step for autoscaled workers: the CRD on each, then the stand-in
autoscaler spawned and recorded at once (so `down` stops it by PID); none on a light
worker or one without the field."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.localfleet import autoscaled_workers, processes, startup
from jobrelay.localfleet.autoscaler_field import AutoscalerShape
from jobrelay.localfleet.fleet_state import ClusterState
from jobrelay.localfleet.shape import ClusterShape

PORTS = {port: 1 for port in ("etcd-client", "apiserver", "controller-manager", "scheduler",
                               "kwok", "jobset-health")}  # fmt: skip


class _FakeClient:
    def __init__(self, name: str) -> None:
        self.cluster = name

    async def __aenter__(self) -> _FakeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def test_the_stand_in_starts_on_each_autoscaled_full_worker_after_its_crd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed: list[str] = []
    said: list[str] = []
    saves: list[int] = []

    async def install(client: Any, crd: dict[str, Any]) -> None:
        assert crd == {"metadata": {"name": "crd"}}
        installed.append(client.cluster)

    monkeypatch.setattr(
        autoscaled_workers, "provisioning_crd", lambda _say: {"metadata": {"name": "crd"}}
    )
    monkeypatch.setattr(autoscaled_workers, "install_provisioning_crd", install)
    monkeypatch.setattr(
        ApiClient, "from_kubeconfig", lambda _path, cluster=None: _FakeClient(str(cluster))
    )
    commands: list[list[str]] = []

    def command(kubeconfig: Path, cluster: str, shape: AutoscalerShape) -> list[str]:
        commands.append([str(kubeconfig), cluster, *shape.flags()])
        return ["sleep", "30"]

    monkeypatch.setattr(autoscaled_workers, "autoscaler_command", command)
    grows = ClusterShape(autoscaler=AutoscalerShape(max_nodes=4, delay="20s"))
    clusters = {
        name: ClusterState(name, dict(PORTS), light=name == "worker-3")
        for name in ("manager", "worker-1", "worker-2", "worker-3")
    }
    shapes = {"manager": ClusterShape(), "worker-1": ClusterShape(), "worker-2": grows,
              "worker-3": grows}  # fmt: skip
    fleet = startup.FleetStartup(
        tmp_path, clusters, shapes=shapes, save=lambda: saves.append(1), say=said.append
    )
    try:
        asyncio.run(fleet._start_autoscalers())
        record = clusters["worker-2"].processes[autoscaled_workers.AUTOSCALER]
        assert processes.is_running(record)
        # Once started it is one of the worker's components: its health is its process.
        assert startup.components_of("worker-2", clusters)[-1] == autoscaled_workers.AUTOSCALER
        assert autoscaled_workers.AUTOSCALER not in startup.components_of("worker-1", clusters)
        assert record.log == str(tmp_path / "worker-2" / "logs" / "autoscaler.log")
    finally:
        processes.stop([r for state in clusters.values() for r in state.processes.values()])
    assert installed == ["worker-2"] and saves
    assert commands == [[str(tmp_path / "worker-2.kubeconfig"), "worker-2", "--max-nodes=4",
                         "--cpu=16", "--memory=64Gi", "--gpu=0", "--delay=20s"]]  # fmt: skip
    assert [name for name, state in clusters.items() if state.processes] == ["worker-2"]
    assert "no stand-in autoscaler on light workers: worker-3" in said
