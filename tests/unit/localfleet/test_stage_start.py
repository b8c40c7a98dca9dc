"""A stage starts on every cluster a few processes at a time, each recorded the moment it
is spawned; a process that fails to start fails the stage."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jobrelay.localfleet import startup
from jobrelay.localfleet.fleet_state import ClusterState, FleetError
from jobrelay.localfleet.processes import ProcessRecord
from jobrelay.localfleet.shape import ClusterShape

APISERVER = "kube-apiserver"


def _fleet(tmp_path: Path, workers: int, saves: list[int]) -> startup.FleetStartup:
    names = ["manager", *(f"worker-{n}" for n in range(1, workers + 1))]
    clusters = {name: ClusterState(name, {"apiserver": 1}) for name in names}
    return startup.FleetStartup(
        tmp_path, clusters, shapes={name: ClusterShape() for name in names},
        save=lambda: saves.append(1), say=lambda _message: None,
    )  # fmt: skip


def _argv(fleet: startup.FleetStartup) -> dict[str, dict[str, list[str]]]:
    return {name: {APISERVER: ["kube-apiserver", name]} for name in fleet.clusters}


@pytest.mark.parametrize("workers", [2, 32])
def test_a_stage_starts_a_few_at_a_time_and_records_each_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    saves: list[int] = []
    fleet = _fleet(tmp_path, workers, saves)
    starting: set[str] = set()
    most_at_once = 0
    spawned: list[str] = []

    def spawn(name: str, component: str, argv: dict[str, list[str]]) -> ProcessRecord:
        nonlocal most_at_once
        assert argv[component] == ["kube-apiserver", name]
        # Recorded before the next one is spawned, so `down` finds every process.
        assert len(saves) == len(spawned)
        spawned.append(name)
        starting.add(name)
        most_at_once = max(most_at_once, len(starting))
        return ProcessRecord(f"{name}/{component}", 1, 1, argv[component], "log")

    async def healthy(state: ClusterState, component: str, ca: Path, **_: Any) -> None:
        assert state.processes[component].name == f"{state.name}/{component}"
        await asyncio.sleep(0.001)
        starting.discard(state.name)

    monkeypatch.setattr(fleet, "_spawn", spawn)
    monkeypatch.setattr(startup, "wait_healthy", healthy)
    asyncio.run(fleet._start_stage_in_turn((APISERVER,), _argv(fleet), tmp_path / "ca.crt"))
    assert sorted(spawned) == sorted(fleet.clusters)
    assert spawned[0] == "manager"
    assert most_at_once == min(workers + 1, startup.STARTING_AT_ONCE)
    assert len(saves) == workers + 1 and not starting


def test_a_process_that_does_not_start_fails_the_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = _fleet(tmp_path, 8, [])

    def spawn(name: str, component: str, argv: dict[str, list[str]]) -> ProcessRecord:
        return ProcessRecord(f"{name}/{component}", 1, 1, argv[component], "log")

    async def healthy(state: ClusterState, component: str, ca: Path, **_: Any) -> None:
        if state.name == "worker-3":
            raise FleetError("worker-3/kube-apiserver exited with code 1 while starting")
        await asyncio.sleep(0.001)

    monkeypatch.setattr(fleet, "_spawn", spawn)
    monkeypatch.setattr(startup, "wait_healthy", healthy)
    with pytest.raises(FleetError, match="worker-3/kube-apiserver exited"):
        asyncio.run(fleet._start_stage_in_turn((APISERVER,), _argv(fleet), tmp_path / "ca.crt"))
