"""LocalFleet without real clusters: state on disk, port assignment, failures before and at start."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.localfleet.fakes import FakeBinaries, listen_in_free_block

from jobrelay.localfleet import cluster, ports, processes
from jobrelay.localfleet.fleet_state import ClusterState, FleetError, NodeShape
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.localfleet.processes import ProcessRecord
from jobrelay.localfleet.shape import DEFAULT, ClusterShape, FleetShape
from jobrelay.placement.workload import Taint

PER_CLUSTER = len(cluster.PORT_NAMES)


def quiet(state_dir: Path) -> LocalFleet:
    return LocalFleet(state_dir, progress=lambda _message: None)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port outside the ephemeral range with a listener on it."""
    port, listener = listen_in_free_block(1, 0)
    with listener:
        yield port


def test_state_round_trips_through_state_json(tmp_path: Path) -> None:
    fleet = quiet(tmp_path)
    record = ProcessRecord("manager/etcd", 123, 456, ["etcd", "--name=manager"], "/x/etcd.log")
    fleet.clusters = {
        "manager": ClusterState(
            "manager", dict.fromkeys(cluster.PORT_NAMES, 20000), {"etcd": record}
        ),
        "worker-1": ClusterState("worker-1", dict.fromkeys(cluster.PORT_NAMES, 20006)),
    }
    fleet.node_shape = NodeShape(count=3, cpu="16", memory="64Gi", gpu=2)
    fleet._save()

    loaded = quiet(tmp_path)
    assert loaded.clusters == fleet.clusters
    assert loaded.node_shape == fleet.node_shape
    assert loaded.workers == ["worker-1"]


def test_unreadable_state_says_how_to_start_afresh(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(FleetError, match=f"remove {tmp_path} to start afresh"):
        quiet(tmp_path)


def test_base_port_gives_each_cluster_a_contiguous_block(tmp_path: Path) -> None:
    base = ports.free_block(2 * PER_CLUSTER)
    assert base is not None
    fleet = quiet(tmp_path)
    fleet._assign_ports(["manager", "worker-1"], base)
    assert list(fleet.clusters["manager"].ports.values()) == list(range(base, base + PER_CLUSTER))
    assert fleet.clusters["worker-1"].ports["etcd-client"] == base + PER_CLUSTER
    assert quiet(tmp_path).clusters["worker-1"].ports == fleet.clusters["worker-1"].ports


def test_recorded_ports_are_kept_and_new_clusters_get_fresh_ones(tmp_path: Path) -> None:
    fleet = quiet(tmp_path)
    fleet._assign_ports(["manager"], 0)
    manager_ports = fleet.clusters["manager"].ports
    fleet._assign_ports(["manager", "worker-1"], 0)
    assert fleet.clusters["manager"].ports == manager_ports
    assert not set(fleet.clusters["worker-1"].ports.values()) & set(manager_ports.values())


def test_a_fleet_recorded_before_the_jobset_controller_keeps_its_ports_and_gains_new_ones(
    tmp_path: Path,
) -> None:
    fleet = quiet(tmp_path)
    fleet._assign_ports(["manager"], 0)
    older = {
        name: port
        for name, port in fleet.clusters["manager"].ports.items()
        if not name.startswith("jobset-")
    }
    fleet.clusters["manager"] = ClusterState("manager", older)
    fleet._save()
    restarted = quiet(tmp_path)
    # Not started yet, so reported as such rather than probed on a port it lacks.
    report = asyncio.run(restarted.health())
    assert report["manager"]["jobset-controller"] == (False, "not started")
    restarted._assign_ports(["manager"], 0)
    ports_now = restarted.clusters["manager"].ports
    assert {name: ports_now[name] for name in older} == older
    assert set(ports_now) == set(cluster.PORT_NAMES)
    assert len(set(ports_now.values())) == PER_CLUSTER


def test_taken_base_port_names_the_holder_and_suggests_another(
    tmp_path: Path, held_port: int
) -> None:
    fleet = quiet(tmp_path)
    with pytest.raises(FleetError) as caught:
        fleet._assign_ports(["manager", "worker-1"], held_port - 2)
    message = str(caught.value)
    assert f"(--base-port {held_port - 2}) are not all free" in message
    assert f"{held_port} (manager apiserver): listened on by pid" in message
    assert f"`jobrelay fleet up --state-dir {tmp_path} --workers 1 --base-port " in message
    assert not (tmp_path / "state.json").exists()


def test_taken_recorded_port_offers_to_move_the_fleet_keeping_data(
    tmp_path: Path, held_port: int
) -> None:
    recorded = dict(zip(cluster.PORT_NAMES, ports.pick(PER_CLUSTER), strict=True))
    recorded["kwok"] = held_port
    fleet = quiet(tmp_path)
    fleet.clusters = {"manager": ClusterState("manager", recorded)}
    with pytest.raises(FleetError) as caught:
        fleet._assign_ports(["manager"], 0)
    message = str(caught.value)
    assert f"ports recorded for the fleet in {tmp_path}/state.json are not all free" in message
    assert f"{held_port} (manager kwok): listened on by pid" in message
    assert f"run `jobrelay fleet up --state-dir {tmp_path}` again" in message
    assert "keeping its data: `jobrelay fleet up --state-dir" in message


def test_base_port_too_high_for_the_fleet(tmp_path: Path) -> None:
    highest = 65535 - 3 * PER_CLUSTER + 1  # 65512 with 8 ports per cluster
    with pytest.raises(FleetError, match=f"choose one at most {highest}"):
        quiet(tmp_path)._assign_ports(["manager", "worker-1", "worker-2"], 65530)


def test_component_exiting_at_start_fails_up_with_its_log_and_stops_the_rest(
    tmp_path: Path, fake_binaries: FakeBinaries
) -> None:
    # etcd "starts" (sleeps) on one cluster but not the other: the survivor must be stopped.
    fake_binaries(
        run={
            "etcd": 'case "$*" in *--name=manager*) exec sleep 30;; esac\n'
            'echo "etcd: cannot open data dir" >&2; exit 2'
        }
    )
    fleet = quiet(tmp_path / "fleet")
    with pytest.raises(FleetError) as caught:
        asyncio.run(fleet.up(workers=1))
    message = str(caught.value)
    assert "worker-1/etcd exited with code 2 while starting" in message
    assert message.count("etcd: cannot open data dir") == 1
    assert "stopped the 1 processes this attempt had started" in message
    assert "then run `jobrelay fleet up --state-dir" in message
    records = quiet(tmp_path / "fleet").all_records()
    assert [record.name for record in records] == ["manager/etcd", "worker-1/etcd"]
    assert not any(processes.is_running(record) for record in records)


def test_unstartable_binary_is_a_fleet_error_not_a_traceback(
    tmp_path: Path, fake_binaries: FakeBinaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_binaries()
    fleet = quiet(tmp_path / "fleet")

    def refuse(*_args: object, **_kwargs: object) -> ProcessRecord:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(processes, "spawn", refuse)
    with pytest.raises(FleetError, match=r"cannot start manager/etcd \(.*etcd\): .*Permission"):
        asyncio.run(fleet.up(workers=1))


def test_down_stops_what_another_instance_started_since(tmp_path: Path) -> None:
    stale = quiet(tmp_path)  # read the state before the fleet below existed
    current = quiet(tmp_path)
    current._assign_ports(["manager"], 0)
    record = processes.spawn("manager/etcd", ["sleep", "30"], tmp_path / "etcd.log")
    current.clusters["manager"].processes["etcd"] = record
    current._save()
    try:
        assert stale.down() == ["manager/etcd"]
    finally:
        processes.stop([record], grace_seconds=0.5)
    assert not processes.is_running(record)


def test_down_without_a_fleet_touches_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "never-used"
    assert quiet(state_dir).down(purge=True) == []
    assert not state_dir.exists()


def test_purge_refuses_a_directory_that_is_not_a_fleet(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(FleetError, match=r"holds no state\.json"):
        quiet(tmp_path).down(purge=True)
    assert (tmp_path / "precious.txt").exists()


def test_purge_removes_a_stopped_fleet(tmp_path: Path) -> None:
    state_dir = tmp_path / "fleet"
    fleet = quiet(state_dir)
    fleet._assign_ports(["manager"], 0)
    (state_dir / "manager" / "etcd").mkdir(parents=True)
    assert fleet.down(purge=True) == []
    assert not state_dir.exists()


def test_commands_in_messages_name_a_non_default_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBRELAY_FLEET_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert quiet(tmp_path / ".fleet").command("down") == "`jobrelay fleet down`"
    assert quiet(tmp_path / "my fleet").command("up", "--base-port", "20000") == (
        f"`jobrelay fleet up --state-dir '{tmp_path}/my fleet' --base-port 20000`"
    )


def _configured() -> FleetShape:
    return FleetShape(
        {
            "worker-small": ClusterShape(nodes=1, cpu="4", labels={"tier": "onprem"}),
            "worker-gpu": ClusterShape(gpu=4, taints=(Taint("nvidia.com/gpu", "", "NoSchedule"),)),
        }
    )


def test_a_configured_shape_round_trips_and_shapes_each_cluster(tmp_path: Path) -> None:
    fleet = quiet(tmp_path)
    fleet.shape = _configured()
    fleet._assign_ports(["manager", *fleet.shape.workers], 0)  # saves the state

    loaded = quiet(tmp_path)
    assert loaded.shape == fleet.shape
    assert loaded.workers == ["worker-small", "worker-gpu"]
    assert loaded.cluster_shapes() == {
        "manager": DEFAULT,
        "worker-small": fleet.shape.workers["worker-small"],
        "worker-gpu": fleet.shape.workers["worker-gpu"],
    }
    assert (
        "worker-gpu" in loaded.summary() and "taints nvidia.com/gpu:NoSchedule" in loaded.summary()
    )


def test_without_a_configuration_every_cluster_has_the_node_shape(tmp_path: Path) -> None:
    fleet = quiet(tmp_path)
    fleet.node_shape = NodeShape(count=3, cpu="16", memory="64Gi", gpu=2)
    fleet._assign_ports(["manager", "worker-1"], 0)
    expected = ClusterShape(nodes=3, cpu="16", memory="64Gi", gpu=2)
    assert quiet(tmp_path).cluster_shapes() == {"manager": expected, "worker-1": expected}


@pytest.mark.parametrize(
    ("recorded", "asked", "made"),
    [
        (None, {"shape": _configured()}, "without a configuration"),
        (_configured(), {"workers": 2}, "from another configuration"),
        (_configured(), {"shape": FleetShape({"worker-small": ClusterShape()})},
         "from another configuration"),
    ],
)  # fmt: skip
def test_a_recorded_fleet_of_another_shape_is_refused_before_anything_starts(
    tmp_path: Path, recorded: FleetShape | None, asked: dict[str, Any], made: str
) -> None:
    fleet = quiet(tmp_path)
    fleet.shape = recorded
    fleet._assign_ports(["manager", *(recorded.workers if recorded else ["worker-1"])], 0)
    with pytest.raises(FleetError) as raised:
        asyncio.run(quiet(tmp_path).up(**asked))
    assert str(raised.value) == (
        f"the fleet in {tmp_path} was made {made}, and its clusters keep their nodes: "
        f"`jobrelay fleet up --state-dir {tmp_path}` brings it back as it was, or "
        f"`jobrelay fleet down --state-dir {tmp_path} --purge` removes it for a new one"
    )


def test_a_configuration_takes_no_worker_count_or_node_shape(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="a fleet configuration names the workers"):
        asyncio.run(quiet(tmp_path).up(shape=_configured(), workers=2))
    assert not (tmp_path / "state.json").exists()
