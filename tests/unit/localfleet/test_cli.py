"""`jobrelay fleet` on bad input and without a fleet: exit codes and what the messages advise."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.unit.localfleet.fakes import FakeBinaries, listen_in_free_block

from jobrelay.cli.fleet import fleet
from jobrelay.localfleet import cluster


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    monkeypatch.delenv("JOBRELAY_FLEET_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_down_without_a_fleet_succeeds_and_creates_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(fleet, ["down", "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"no fleet in {tmp_path}/none: nothing to stop\n"
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("command", ["status", "env"])
def test_status_and_env_without_a_fleet_say_how_to_start_one(
    runner: CliRunner, tmp_path: Path, command: str
) -> None:
    result = runner.invoke(fleet, [command, "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no fleet in {tmp_path}/none: start one with "
        f"`jobrelay fleet up --state-dir {tmp_path}/none`\n"
    )


def test_default_state_dir_hint_mentions_how_to_point_elsewhere(runner: CliRunner) -> None:
    result = runner.invoke(fleet, ["status"])
    assert result.exit_code == 1
    assert "start one with `jobrelay fleet up` (or pass --state-dir" in result.stderr


def test_purge_of_a_directory_that_is_not_a_fleet_is_refused(
    runner: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("not a fleet")
    result = runner.invoke(fleet, ["down", "--purge", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "holds no state.json, so it is not a fleet's state directory" in result.stderr
    assert (tmp_path / "notes.txt").exists()


def test_wrong_version_binary_fails_up_before_anything_starts(
    runner: CliRunner, tmp_path: Path, fake_binaries: FakeBinaries
) -> None:
    fake_binaries(kube_scheduler="Kubernetes v1.34.2")
    result = runner.invoke(fleet, ["up", "--state-dir", str(tmp_path / "f")])
    assert result.exit_code == 1
    assert "kube-scheduler reports 'Kubernetes v1.34.2', not Kubernetes v1.35.x" in result.stderr
    assert "To fix: JOBRELAY_K8S_BIN_DIR=" in result.stderr
    assert not (tmp_path / "f" / "state.json").exists()


def test_taken_base_port_fails_up_naming_the_port_and_its_holder(
    runner: CliRunner, tmp_path: Path, fake_binaries: FakeBinaries
) -> None:
    fake_binaries()
    per_cluster = len(cluster.PORT_NAMES)
    base, listener = listen_in_free_block(2 * per_cluster, per_cluster + 1)
    worker_etcd_peer = base + per_cluster + 1
    with listener:
        result = runner.invoke(
            fleet,
            ["up", "--workers", "1", "--base-port", str(base), "--state-dir", str(tmp_path / "f")],
        )
    assert result.exit_code == 1
    assert f"{worker_etcd_peer} (worker-1 etcd-peer): listened on by pid" in result.stderr
    assert "choose another base port, e.g. `jobrelay fleet up --state-dir" in result.stderr


def test_half_started_fleet_reports_the_log_and_down_finds_nothing_running(
    runner: CliRunner, tmp_path: Path, fake_binaries: FakeBinaries
) -> None:
    fake_binaries(run={"etcd": "echo 'etcdmain: listener failed' >&2; exit 1"})
    state_dir = tmp_path / "f"
    up = runner.invoke(fleet, ["up", "--workers", "1", "--state-dir", str(state_dir)])
    assert up.exit_code == 1
    # Both clusters' etcd fail; whichever is noticed first is reported.
    assert re.search(r"(manager|worker-1)/etcd exited with code 1 while starting", up.stderr)
    assert "etcdmain: listener failed" in up.stderr

    status = runner.invoke(fleet, ["status", "--state-dir", str(state_dir)])
    assert status.exit_code == 1
    assert "DOWN etcd" in status.stdout and "not running (pid" in status.stdout
    assert "DOWN kube-apiserver           not started" in status.stdout
    assert "no component is running" in status.stderr

    down = runner.invoke(fleet, ["down", "--state-dir", str(state_dir)])
    assert down.exit_code == 0
    assert down.stdout == f"nothing was running in {state_dir}\n"
    state = json.loads((state_dir / "state.json").read_text())
    assert all(not cluster["processes"] for cluster in state["clusters"].values())


def test_status_of_a_stopped_fleet_says_up_restarts_it(
    runner: CliRunner, tmp_path: Path, fake_binaries: FakeBinaries
) -> None:
    fake_binaries(run={"etcd": "exit 1"})
    state_dir = tmp_path / "f"
    runner.invoke(fleet, ["up", "--workers", "1", "--state-dir", str(state_dir)])
    runner.invoke(fleet, ["down", "--state-dir", str(state_dir)])
    result = runner.invoke(fleet, ["status", "--state-dir", str(state_dir)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: the fleet in {state_dir} is stopped: `jobrelay fleet up --state-dir "
        f"{state_dir}` starts it again with its data\n"
    )
    env = runner.invoke(fleet, ["env", "--state-dir", str(state_dir)])
    assert env.stdout.splitlines() == [
        f"export KUBECONFIG_MANAGER={state_dir}/manager.kubeconfig",
        f"export KUBECONFIG_WORKER_1={state_dir}/worker-1.kubeconfig",
        f"export KUBECONFIG={state_dir}/manager.kubeconfig",
    ]


def test_a_bad_config_is_a_usage_error_naming_file_cluster_and_field(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text("clusters:\n  worker-1: {nodes: 2, cpu: lots}\n")
    result = runner.invoke(
        fleet, ["up", "--config", str(config), "--state-dir", str(tmp_path / "f")]
    )
    assert result.exit_code == 2
    assert (
        f"{config}: cluster 'worker-1': field 'cpu': 'lots' is not a Kubernetes quantity"
        in result.stderr
    )
    assert not (tmp_path / "f").exists()


def test_a_missing_config_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(fleet, ["up", "--config", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


@pytest.mark.parametrize(
    "option", [["--workers", "3"], ["--nodes-per-cluster", "1"], ["--node-gpu", "2"]]
)
def test_config_takes_no_worker_or_node_options(
    runner: CliRunner, tmp_path: Path, option: list[str]
) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text("clusters: {worker-1: {}}\n")
    result = runner.invoke(
        fleet, ["up", "--config", str(config), *option, "--state-dir", str(tmp_path / "f")]
    )
    assert result.exit_code == 2
    assert "--config gives every cluster's shape: leave out --workers" in result.stderr
    assert not (tmp_path / "f").exists()
