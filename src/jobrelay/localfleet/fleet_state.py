"""What a local fleet records about itself in its state directory: each cluster's
ports and processes, and the shape of its nodes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobrelay.localfleet.processes import ProcessRecord
from jobrelay.localfleet.shape import ClusterShape

DEFAULT_WORKERS = 2
STATE_FILE = "state.json"


class FleetError(RuntimeError):
    """Something stops the fleet from coming up; the message says what to do."""


@dataclass(frozen=True)
class NodeShape:
    """One shape for the nodes of every cluster: the fleet without a configuration file."""

    count: int = 2
    cpu: str = "8"
    memory: str = "32Gi"
    gpu: int = 0
    pods: int = 110

    def cluster_shape(self) -> ClusterShape:
        return ClusterShape(
            nodes=self.count, cpu=self.cpu, memory=self.memory, gpu=self.gpu, pods=self.pods
        )


@dataclass
class ClusterState:
    name: str
    ports: dict[str, int]
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    # A light worker (`fleet up --light`, light.py): its apiserver only.
    light: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "ports": self.ports,
            "processes": {name: record.to_json() for name, record in self.processes.items()},
            **({"light": True} if self.light else {}),
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> ClusterState:
        return cls(
            name=name,
            ports={key: int(value) for key, value in data["ports"].items()},
            processes={
                key: ProcessRecord.from_json(value)
                for key, value in data.get("processes", {}).items()
            },
            light=bool(data.get("light", False)),
        )


def default_state_dir() -> Path:
    return Path(os.environ.get("JOBRELAY_FLEET_DIR") or Path.cwd() / ".fleet")


def worker_names(count: int) -> list[str]:
    return [f"worker-{index}" for index in range(1, count + 1)]
