"""The local fleet the bench runs against, driven through the ``jobrelay fleet`` CLI.

The bench either reuses a healthy fleet (``--state-dir``), or brings one up
and, unless asked to keep it, stops it again at the end (and deletes it when
it lives in a temporary directory the bench created).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MANAGER = "manager"


class FleetError(RuntimeError):
    pass


@dataclass(frozen=True)
class FleetShape:
    workers: int = 2
    nodes_per_cluster: int = 8
    node_cpu: str = "64"
    node_memory: str = "256Gi"


def _jobrelay(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "jobrelay", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if check and result.returncode != 0:
        raise FleetError(f"`jobrelay {' '.join(args)}` failed:\n{result.stdout}")
    return result


class Fleet:
    """Kubeconfigs of the fleet's clusters, and who is responsible for stopping it."""

    def __init__(self, state_dir: Path, *, started_here: bool, temporary: bool) -> None:
        self.state_dir = state_dir
        self.started_here = started_here
        self.temporary = temporary

    @classmethod
    def ensure(cls, state_dir: Path | None, shape: FleetShape) -> Fleet:
        temporary = state_dir is None
        directory = (
            Path(tempfile.mkdtemp(prefix="jobrelay-bench-fleet-"))
            if state_dir is None
            else state_dir.absolute()
        )
        healthy = (
            not temporary
            and (directory / "state.json").exists()
            and _jobrelay("fleet", "status", "--state-dir", str(directory), check=False).returncode
            == 0
        )
        fleet = cls(directory, started_here=not healthy, temporary=temporary)
        if healthy:
            print(f"bench: reusing the healthy fleet in {directory}", file=sys.stderr)
        else:
            print(f"bench: bringing up a fleet in {directory} ...", file=sys.stderr)
            # Streamed, not captured: a first run builds Kubernetes for many minutes.
            code = subprocess.run(
                [sys.executable, "-m", "jobrelay", "fleet", "up", "--state-dir", str(directory),
                 "--workers", str(shape.workers),
                 "--nodes-per-cluster", str(shape.nodes_per_cluster),
                 "--node-cpu", shape.node_cpu, "--node-memory", shape.node_memory],
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr,  # the bench's stdout is the Markdown report
                check=False,
            ).returncode  # fmt: skip
            if code != 0:
                fleet.down()
                raise FleetError(f"`jobrelay fleet up` failed (exit code {code}); see above")
        if MANAGER not in fleet.clusters or not fleet.workers:
            raise FleetError(f"{directory} holds no manager and workers: {fleet.clusters}")
        return fleet

    @property
    def clusters(self) -> list[str]:
        return sorted(path.stem for path in self.state_dir.glob("*.kubeconfig"))

    @property
    def workers(self) -> list[str]:
        return [name for name in self.clusters if name != MANAGER]

    def shape(self) -> str:
        """The nodes of each cluster, from the fleet's state file (best effort)."""
        try:
            nodes = json.loads((self.state_dir / "state.json").read_text())["nodes"]
            return f"{nodes['count']} nodes x {nodes['cpu']} CPU / {nodes['memory']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown nodes"

    def record(self) -> dict[str, object]:
        """What a result records of the fleet: read while it runs (a temporary fleet's
        state is gone after :meth:`down`)."""
        return {
            "state_dir": str(self.state_dir),
            "started_here": self.started_here,
            "workers": self.workers,
            "shape": self.shape(),
        }

    def kubeconfig(self, cluster: str) -> Path:
        return self.state_dir / f"{cluster}.kubeconfig"

    def down(self) -> None:
        """Stop the fleet if this bench started it (and delete it if it is temporary)."""
        if not self.started_here:
            return
        args = ["fleet", "down", "--state-dir", str(self.state_dir)]
        if self.temporary:
            args.append("--purge")
        result = _jobrelay(*args, check=False)
        print(f"bench: {result.stdout.strip()}", file=sys.stderr)
        if self.temporary and self.state_dir.exists() and result.returncode == 0:
            shutil.rmtree(self.state_dir, ignore_errors=True)
