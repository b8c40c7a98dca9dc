"""A fleet of real local clusters: one manager and N workers on 127.0.0.1.

State lives in one directory (default ``.fleet/`` under the current
directory, or ``$JOBRELAY_FLEET_DIR``): ``state.json`` records every port and
every process we started (PID and kernel start time), so ``down`` stops
exactly those, and a later ``up`` can tell a healthy fleet (return at once)
from the leftovers of a crashed run (clean up, then start again, keeping the
clusters' etcd data).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobrelay.kube.health import probe
from jobrelay.localfleet import binaries as binaries_mod
from jobrelay.localfleet import cluster, nodes, pki, processes
from jobrelay.localfleet.processes import ProcessRecord

MANAGER = "manager"
STATE_FILE = "state.json"
STARTUP_TIMEOUT = 90.0

Progress = Callable[[str], None]


class FleetError(RuntimeError):
    """Something stops the fleet from coming up; the message says what to do."""


@dataclass(frozen=True)
class NodeShape:
    count: int = 2
    cpu: str = "8"
    memory: str = "32Gi"
    gpu: int = 0
    pods: int = 110


@dataclass
class ClusterState:
    name: str
    ports: dict[str, int]
    processes: dict[str, ProcessRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "ports": self.ports,
            "processes": {name: record.to_json() for name, record in self.processes.items()},
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
        )


def default_state_dir() -> Path:
    return Path(os.environ.get("JOBRELAY_FLEET_DIR") or Path.cwd() / ".fleet")


def worker_names(count: int) -> list[str]:
    return [f"worker-{index}" for index in range(1, count + 1)]


class LocalFleet:
    """Brings a local fleet up and down, and reports on it."""

    def __init__(self, state_dir: Path | None = None, *, progress: Progress = print) -> None:
        self.state_dir = (state_dir or default_state_dir()).absolute()
        self._progress = progress
        self.clusters: dict[str, ClusterState] = {}
        self.node_shape = NodeShape()
        self._load()

    # --- state -------------------------------------------------------------

    @property
    def _state_path(self) -> Path:
        return self.state_dir / STATE_FILE

    def _load(self) -> None:
        try:
            data = json.loads(self._state_path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as error:
            raise FleetError(
                f"{self._state_path} is unreadable ({error}); remove {self.state_dir} to start afresh"
            ) from error
        self.clusters = {
            name: ClusterState.from_json(name, value)
            for name, value in data.get("clusters", {}).items()
        }
        self.node_shape = NodeShape(**data.get("nodes", {}))

    def _save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "kubernetes": binaries_mod.K8S_VERSION,
            "nodes": self.node_shape.__dict__,
            "clusters": {name: state.to_json() for name, state in self.clusters.items()},
        }
        temporary = self._state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=2))
        temporary.replace(self._state_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / ".lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as error:
                raise FleetError(
                    f"another `jobrelay fleet` command is working on {self.state_dir}; wait for it"
                ) from error
            yield

    # --- queries -----------------------------------------------------------

    @property
    def workers(self) -> list[str]:
        return [name for name in self.clusters if name != MANAGER]

    def files(self, name: str) -> cluster.ClusterFiles:
        return cluster.ClusterFiles(self.state_dir, name)

    def kubeconfig(self, name: str) -> Path:
        if name not in self.clusters:
            raise FleetError(f"no cluster named {name!r} in {self.state_dir}")
        return self.files(name).admin_kubeconfig

    def all_records(self) -> list[ProcessRecord]:
        return [record for state in self.clusters.values() for record in state.processes.values()]

    def running_count(self) -> tuple[int, int]:
        records = self.all_records()
        return sum(processes.is_running(record) for record in records), len(records)

    async def health(self) -> dict[str, dict[str, tuple[bool, str]]]:
        """Per cluster and component: (healthy, detail)."""
        ca = pki.CertPair(self.state_dir / "pki" / "ca.crt", self.state_dir / "pki" / "ca.key").cert

        async def check(state: ClusterState, component: str) -> tuple[bool, str]:
            record = state.processes.get(component)
            if record is None:
                return False, "never started"
            if not processes.is_running(record):
                return False, f"not running (pid {record.pid} gone)"
            ok, detail = await probe(cluster.health_urls(state.ports)[component], ca=ca)
            return ok, f"pid {record.pid}, {detail}"

        result: dict[str, dict[str, tuple[bool, str]]] = {}
        for name, state in self.clusters.items():
            checks = await asyncio.gather(*(check(state, c) for c in cluster.COMPONENTS))
            result[name] = dict(zip(cluster.COMPONENTS, checks, strict=True))
        return result

    async def is_healthy(self) -> bool:
        if not self.clusters:
            return False
        report = await self.health()
        return all(ok for components in report.values() for ok, _ in components.values())

    # --- up ----------------------------------------------------------------

    async def up(
        self, *, workers: int = 2, node_shape: NodeShape | None = None, base_port: int = 0
    ) -> bool:
        """Bring the fleet up; returns False when it was already healthy and nothing was done."""
        with self._locked():
            wanted = [MANAGER, *worker_names(workers)]
            if self.clusters and await self.is_healthy():
                if sorted(self.clusters) != sorted(wanted):
                    raise FleetError(
                        f"the fleet in {self.state_dir} runs {', '.join(self.clusters)}; "
                        f"run `jobrelay fleet down` before asking for {workers} workers"
                    )
                return False
            running, total = self.running_count()
            if total:
                self._progress(
                    f"found a stopped or broken fleet in {self.state_dir} ({running} of {total} "
                    "processes running, e.g. after a crash): stopping what is left and starting again"
                )
                processes.stop(self.all_records())
            binaries = binaries_mod.resolve(self._progress)
            if node_shape is not None:
                self.node_shape = node_shape
            self._assign_ports(wanted, base_port)
            started = time.monotonic()
            try:
                await self._start(binaries)
            except BaseException:
                self._progress("stopping what was started ...")
                processes.stop(self.all_records())
                self._save()
                raise
            self._progress(f"fleet up in {time.monotonic() - started:.1f}s")
            return True

    def _assign_ports(self, wanted: list[str], base_port: int) -> None:
        """Reuse each cluster's recorded ports (etcd remembers its peer URL); pick new ones otherwise."""
        previous = self.clusters
        self.clusters = {}
        fresh = _free_ports(len(wanted) * len(cluster.PORT_NAMES), base_port)
        for index, name in enumerate(wanted):
            if name in previous and not base_port:
                ports = previous[name].ports
            else:
                offset = index * len(cluster.PORT_NAMES)
                ports = dict(
                    zip(
                        cluster.PORT_NAMES,
                        fresh[offset : offset + len(cluster.PORT_NAMES)],
                        strict=True,
                    )
                )
            for port_name, port in ports.items():
                if not _port_is_free(port):
                    raise FleetError(
                        f"port {port} ({name} {port_name}) is already in use by another program; "
                        f"stop that program, or pick other ports with `jobrelay fleet up --base-port N` "
                        f"(or remove {self.state_dir} to start afresh with new ones)"
                    )
            self.clusters[name] = ClusterState(name, ports)
        self._save()

    async def _start(self, binaries: binaries_mod.Binaries) -> None:
        pki_dir = self.state_dir / "pki"
        ca = pki.ensure_ca(pki_dir)
        admin = pki.issue(
            ca, pki_dir, "admin", common_name="jobrelay-admin", organization="system:masters"
        )
        argv: dict[str, dict[str, list[str]]] = {}
        for name, state in self.clusters.items():
            files = self.files(name)
            cluster.prepare(files, ca=ca, admin=admin, ports=state.ports)
            argv[name] = cluster.commands(files, binaries, ca=ca.cert, ports=state.ports)
        # Each stage starts on every cluster at once: the apiservers' start-up is
        # what costs, and three of them overlap well even on two cores.
        for stage in (
            ("etcd",),
            ("kube-apiserver",),
            ("kube-controller-manager", "kube-scheduler", "kwok"),
        ):
            self._progress(f"starting {', '.join(stage)} on {len(self.clusters)} clusters ...")
            for name, state in self.clusters.items():
                for component in stage:
                    state.processes[component] = processes.spawn(
                        f"{name}/{component}",
                        argv[name][component],
                        self.files(name).log(component),
                        env=cluster.ENVIRONMENT.get(component),
                    )
            self._save()
            await asyncio.gather(
                *(
                    self._wait_healthy(state, component, ca.cert)
                    for state in self.clusters.values()
                    for component in stage
                )
            )
        self._progress("creating simulated nodes and registering workers ...")
        await nodes.prepare_clusters(
            {name: self.files(name).admin_kubeconfig for name in self.clusters},
            manager=MANAGER,
            shape=self.node_shape,
        )

    async def _wait_healthy(self, state: ClusterState, component: str, ca: Path) -> None:
        record = state.processes[component]
        url = cluster.health_urls(state.ports)[component]
        deadline = time.monotonic() + STARTUP_TIMEOUT
        detail = ""
        while time.monotonic() < deadline:
            code = processes.exit_status(record)
            if code is not None or not processes.is_running(record):
                raise FleetError(
                    f"{record.name} exited (code {code}) while starting; its log {record.log} ends:\n"
                    + processes.log_tail(record)
                )
            ok, detail = await probe(url, ca=ca)
            if ok:
                return
            await asyncio.sleep(0.2)
        raise FleetError(
            f"{record.name} did not become healthy within {STARTUP_TIMEOUT:.0f}s ({detail}); "
            f"its log {record.log} ends:\n{processes.log_tail(record)}"
        )

    # --- down --------------------------------------------------------------

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every recorded process; with ``purge``, delete the state directory too."""
        with self._locked():
            stopped = processes.stop(self.all_records())
            for state in self.clusters.values():
                state.processes.clear()
            if self.clusters:
                self._save()
        if purge and self.state_dir.exists():
            import shutil

            shutil.rmtree(self.state_dir)
            self.clusters = {}
        return stopped

    # --- reporting ---------------------------------------------------------

    def env_exports(self) -> str:
        lines = []
        for name in self.clusters:
            variable = "KUBECONFIG_" + name.upper().replace("-", "_")
            lines.append(f"export {variable}={self.kubeconfig(name)}")
        if MANAGER in self.clusters:
            lines.append(f"export KUBECONFIG={self.kubeconfig(MANAGER)}")
        return "\n".join(lines)

    def summary(self) -> str:
        lines = [
            f"local fleet in {self.state_dir} (Kubernetes {binaries_mod.K8S_VERSION}, KWOK nodes):"
        ]
        shape = self.node_shape
        for name, state in self.clusters.items():
            lines.append(
                f"  {name:<10} https://127.0.0.1:{state.ports['apiserver']}  "
                f"{shape.count} nodes x {shape.cpu} CPU / {shape.memory}"
                + (f" / {shape.gpu} GPU" if shape.gpu else "")
                + f"  kubeconfig {self.kubeconfig(name)}"
            )
        lines.append(f'  shell exports: eval "$(jobrelay fleet env --state-dir {self.state_dir})"')
        return "\n".join(lines)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe_socket:
        # As Go's listeners do: a port whose old connections linger in TIME_WAIT is free.
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe_socket.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int, base_port: int) -> list[int]:
    if base_port:
        return list(range(base_port, base_port + count))
    # Hold every socket until all are chosen, so the kernel hands out distinct ports.
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
