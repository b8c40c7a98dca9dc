"""CPU over the user's window: the controller's and every fleet process's, from ``/proc``.

The user's window runs from the first create sent to the last Job seen
Complete (or Failed) on the cluster the user submitted to. CPU is a process's
``utime + stime`` (all its threads) read from ``/proc/PID/stat`` at the
window's start and at its end: no sampling, so nothing between two samples is
lost. The fleet's processes come from the fleet's ``state.json``; a recorded
start time guards against a PID reused by another process.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Json = dict[str, Any]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MANAGER_CLUSTER = "manager"
# Fields of /proc/PID/stat counted from the one after the command name (field 3 = index 0).
_UTIME, _STIME, _STARTTIME = 11, 12, 19


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What the window needs of one ``/proc/PID/stat`` line."""

    cpu_ticks: int  # utime + stime
    start_ticks: int  # start time since boot, in clock ticks


def parse_proc_stat(text: str) -> ProcStat:
    """``/proc/PID/stat``'s CPU and start time. The command name may hold spaces and
    parentheses, so fields are counted after its last ``)``."""
    fields = text[text.rindex(")") + 2 :].split()
    return ProcStat(
        cpu_ticks=int(fields[_UTIME]) + int(fields[_STIME]), start_ticks=int(fields[_STARTTIME])
    )


@dataclass(frozen=True, slots=True)
class FleetProcess:
    """One process of the fleet, as its state file records it."""

    cluster: str  # "manager", "worker-1" ..., or "shared" (outside any one cluster)
    name: str  # "apiserver", "etcd", "kwok", a stand-in ...
    pid: int
    start_ticks: int

    @property
    def role(self) -> str:
        """manager, workers, or shared: how the report splits the fleet's CPU."""
        if self.cluster == MANAGER_CLUSTER:
            return "manager"
        return "shared" if self.cluster == "shared" else "workers"


def _records(
    node: Any, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any]]]:
    if isinstance(node, Mapping):
        if isinstance(node.get("pid"), int) and isinstance(node.get("start_ticks"), int):
            yield path, node
            return
        for key, value in node.items():
            yield from _records(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _records(value, (*path, str(index)))


def fleet_processes(state: Mapping[str, Any]) -> list[FleetProcess]:
    """Every process a fleet's ``state.json`` records, wherever it is (a cluster's
    ``processes``, or a process shared by several clusters, such as a stand-in)."""
    found = []
    for path, record in _records(state, ()):
        cluster = path[1] if len(path) >= 2 and path[0] == "clusters" else "shared"
        name = str(record.get("name") or path[-1]).removeprefix(f"{cluster}/")
        found.append(FleetProcess(cluster, name, int(record["pid"]), int(record["start_ticks"])))
    return found


def load_fleet_processes(state_dir: Path) -> list[FleetProcess]:
    try:
        state = json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return []
    return fleet_processes(state) if isinstance(state, Mapping) else []


@dataclass(frozen=True)
class CpuReading:
    """CPU ticks of the controller and of each fleet process at one moment.

    A process that is gone (or whose PID now names another process) is absent.
    """

    at: float  # time.monotonic()
    controller: int | None
    fleet: dict[FleetProcess, int] = field(default_factory=dict)


def _read_stat(pid: int) -> ProcStat | None:
    try:
        return parse_proc_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def read_cpu(controller_pid: int | None, processes: Sequence[FleetProcess]) -> CpuReading:
    at = time.monotonic()
    own = _read_stat(controller_pid) if controller_pid is not None else None
    fleet = {}
    for process in processes:
        stat = _read_stat(process.pid)
        if stat is not None and stat.start_ticks == process.start_ticks:
            fleet[process] = stat.cpu_ticks
    return CpuReading(at, own.cpu_ticks if own is not None else None, fleet)


def user_window(submitted: Sequence[float], finished: Sequence[float]) -> tuple[float, float]:
    """(first create sent, last Job finished): NaNs are ignored; NaN when either is empty."""
    starts = [s for s in submitted if not math.isnan(s)]
    ends = [f for f in finished if not math.isnan(f)]
    if not starts or not ends:
        return math.nan, math.nan
    return min(starts), max(ends)


def _per_job_ms(seconds: float, jobs: int) -> float:
    return 1000.0 * seconds / jobs if jobs > 0 else math.nan


def window_cpu(start: CpuReading, end: CpuReading, jobs: int, ticks: int = CLOCK_TICKS) -> Json:
    """The controller's and the fleet's CPU between two readings, total and per Job.

    Only processes read at both ends count; those that were not are listed.
    """
    seconds = end.at - start.at
    controller = (
        (end.controller - start.controller) / ticks
        if start.controller is not None and end.controller is not None
        else math.nan
    )
    by_role: dict[str, float] = {}
    by_cluster: dict[str, float] = {}
    by_component: dict[str, float] = {}
    missing: list[str] = []
    for process in sorted(set(start.fleet) | set(end.fleet), key=lambda p: (p.cluster, p.name)):
        if process not in start.fleet or process not in end.fleet:
            missing.append(f"{process.cluster}/{process.name}")
            continue
        used = (end.fleet[process] - start.fleet[process]) / ticks
        by_role[process.role] = by_role.get(process.role, 0.0) + used
        by_cluster[process.cluster] = by_cluster.get(process.cluster, 0.0) + used
        by_component[process.name] = by_component.get(process.name, 0.0) + used
    fleet = sum(by_role.values())
    return {
        "seconds": seconds,
        "jobs": jobs,
        "controller_cpu_s": controller,
        "controller_cpu_ms_per_job": _per_job_ms(controller, jobs),
        "controller_cores": controller / seconds if seconds > 0 else math.nan,
        "fleet_cpu_s": fleet,
        "fleet_cpu_ms_per_job": _per_job_ms(fleet, jobs),
        "fleet_cores": fleet / seconds if seconds > 0 else math.nan,
        "fleet_processes": len(start.fleet),
        "fleet_missing": missing,
        "by_role_s": by_role,
        "by_role_ms_per_job": {role: _per_job_ms(s, jobs) for role, s in by_role.items()},
        "by_cluster_s": by_cluster,
        "by_component_s": by_component,
    }
