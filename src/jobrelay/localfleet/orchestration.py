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
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from jobrelay.kube.probes import probe
from jobrelay.localfleet import cluster, pki, ports, processes
from jobrelay.localfleet import light as light_mod
from jobrelay.localfleet import shape as shape_mod
from jobrelay.localfleet.binaries import Progress
from jobrelay.localfleet.binaries.resolver import resolve as resolve_binaries
from jobrelay.localfleet.binaries.versions import JOBSET_VERSION, K8S_VERSION
from jobrelay.localfleet.cluster_files import ClusterFiles, Credential
from jobrelay.localfleet.fleet_state import (
    DEFAULT_WORKERS,
    STATE_FILE,
    ClusterState,
    FleetError,
    NodeShape,
    default_state_dir,
    worker_names,
)
from jobrelay.localfleet.processes import ProcessRecord
from jobrelay.localfleet.shape import MANAGER, ClusterShape, FleetShape, ShapeError
from jobrelay.localfleet.startup import (
    STAGES,
    FleetStartup,
    components_of,
    health_url,
    wait_healthy,
)

# A loaded machine can make a live component miss a 2 s probe; re-probe this
# long before `up` declares a fleet broken and restarts it under its users.
HEALTH_GRACE = 10.0


class LocalFleet:
    """Brings a local fleet up and down, and reports on it."""

    def __init__(self, state_dir: Path | None = None, *, progress: Progress = print) -> None:
        self.state_dir = (state_dir or default_state_dir()).absolute()
        self._progress = progress
        self.clusters: dict[str, ClusterState] = {}
        self.node_shape = NodeShape()
        # The configuration's shape (`fleet up --config`); None: every cluster is node_shape.
        self.shape: FleetShape | None = None
        self._load()

    def _say(self, message: str) -> None:
        # Progress is a courtesy: a closed stderr (`jobrelay fleet up | head`) must
        # not abort a start half-way, nor the clean-up after a failed one.
        with contextlib.suppress(OSError):
            self._progress(message)

    # --- state -------------------------------------------------------------

    @property
    def _state_path(self) -> Path:
        return self.state_dir / STATE_FILE

    def _load(self) -> None:
        try:
            data = json.loads(self._state_path.read_text())
        except FileNotFoundError:
            self.clusters, self.node_shape, self.shape = {}, NodeShape(), None
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
        try:
            self.shape = (
                shape_mod.parse(data["shape"], str(self._state_path)) if "shape" in data else None
            )
        except ShapeError as error:
            raise FleetError(f"{error}; remove {self.state_dir} to start afresh") from error

    def _save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "kubernetes": K8S_VERSION,
            "jobset": JOBSET_VERSION,
            "nodes": self.node_shape.__dict__,
            **({"shape": self.shape.to_config()} if self.shape is not None else {}),
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
            # Another LocalFleet (another command, another test) may have restarted
            # or purged the fleet since this one read the state: act on what is true now.
            self._load()
            yield

    def command(self, verb: str, *options: str) -> str:
        """The `jobrelay fleet` command line for this state directory, to quote in messages."""
        words = ["jobrelay", "fleet", verb]
        if self.state_dir != default_state_dir().absolute():
            words += ["--state-dir", shlex.quote(str(self.state_dir))]
        return "`" + " ".join([*words, *options]) + "`"

    # --- queries -----------------------------------------------------------

    @property
    def workers(self) -> list[str]:
        return [name for name in self.clusters if name != MANAGER]

    def files(self, name: str) -> ClusterFiles:
        return ClusterFiles(self.state_dir, name)

    def kubeconfig(self, name: str, credential: Credential = Credential.CERT) -> Path:
        """A kubeconfig of cluster ``name``: the admin's certificate, or a bearer token."""
        if name not in self.clusters:
            raise FleetError(f"no cluster named {name!r} in {self.state_dir}")
        return self.files(name).credential_kubeconfig(credential)

    def cluster_shapes(self) -> dict[str, ClusterShape]:
        """Each recorded cluster's shape: from the configuration, else the common node shape."""
        configured = self.shape.clusters() if self.shape is not None else {}
        common = self.node_shape.cluster_shape()
        return {name: configured.get(name, common) for name in self.clusters}

    def all_records(self) -> list[ProcessRecord]:
        return [record for state in self.clusters.values() for record in state.processes.values()]

    def running_count(self) -> tuple[int, int]:
        records = self.all_records()
        return sum(processes.is_running(record) for record in records), len(records)

    def not_running(self) -> list[str]:
        """Every cluster component without a live process: gone, or never started."""
        return [
            f"{name}/{component}"
            for name, state in self.clusters.items()
            for component in components_of(name, self.clusters)
            if (record := state.processes.get(component)) is None
            or not processes.is_running(record)
        ]

    async def health(self) -> dict[str, dict[str, tuple[bool, str]]]:
        """Per cluster and component: (healthy, detail)."""
        ca = pki.CertPair(self.state_dir / "pki" / "ca.crt", self.state_dir / "pki" / "ca.key").cert

        async def check(state: ClusterState, component: str) -> tuple[bool, str]:
            record = state.processes.get(component)
            if record is None:
                return False, "not started"
            if not processes.is_running(record):
                return False, f"not running (pid {record.pid} gone)"
            url = health_url(state, component)
            ok, detail = (True, "running") if url is None else await probe(url, ca=ca)
            return ok, f"pid {record.pid}, {detail}"

        result: dict[str, dict[str, tuple[bool, str]]] = {}
        for name, state in self.clusters.items():
            components = components_of(name, self.clusters)
            checks = await asyncio.gather(*(check(state, c) for c in components))
            result[name] = dict(zip(components, checks, strict=True))
        return result

    async def is_healthy(self) -> bool:
        if not self.clusters:
            return False
        report = await self.health()
        return all(ok for components in report.values() for ok, _ in components.values())

    # --- up ----------------------------------------------------------------

    async def up(
        self,
        *,
        workers: int | None = None,
        node_shape: NodeShape | None = None,
        shape: FleetShape | None = None,
        base_port: int = 0,
        light: bool | None = None,
    ) -> bool:
        """Bring the fleet up; returns False when it was already healthy and nothing was done.

        ``shape`` (from a configuration file) names the workers and shapes each
        cluster; without it, ``workers`` worker-N clusters all get ``node_shape``.
        With neither, a recorded fleet comes back as it was; else ``workers``
        defaults to ``DEFAULT_WORKERS`` and ``node_shape`` to the recorded one.
        ``base_port`` moves every cluster to ports from there up. ``light`` makes every
        worker a light one (light.py); None: as recorded, else not.
        """
        if shape is not None and (workers is not None or node_shape is not None):
            raise FleetError("a fleet configuration names the workers and shapes their nodes: "
                             "give it no worker count or node shape besides")  # fmt: skip
        with self._locked():
            light = light_mod.light_asked(
                light, self.clusters, configured=shape is not None,
                purge=f"the fleet in {self.state_dir}: {self.command('down', '--purge')}",
            )  # fmt: skip
            if shape is None and workers is None and node_shape is None and self.clusters:
                shape = self.shape  # a restart brings back the same fleet
            if self.clusters and shape != self.shape:
                made = "from another configuration" if self.shape else "without a configuration"
                raise FleetError(
                    f"the fleet in {self.state_dir} was made {made}, and its clusters keep "
                    f"their nodes: {self.command('up')} brings it back as it was, or "
                    f"{self.command('down', '--purge')} removes it for a new one"
                )
            if shape is not None:
                wanted = [MANAGER, *shape.workers]
            else:
                if workers is None:
                    workers = len(self.workers) if self.clusters else DEFAULT_WORKERS
                wanted = [MANAGER, *worker_names(workers)]
            if self.clusters and await self._healthy_within(HEALTH_GRACE):
                if sorted(self.clusters) != sorted(wanted):
                    raise FleetError(
                        f"the fleet in {self.state_dir} runs {', '.join(self.clusters)}; "
                        f"run {self.command('down')} before asking for {len(wanted) - 1} workers"
                    )
                return False
            running, total = self.running_count()
            if running:
                down = self.not_running()
                self._say(
                    f"found a broken fleet in {self.state_dir} ("
                    + (
                        f"not running: {', '.join(down)}"
                        if down
                        else "every process runs, but not all pass their health checks"
                    )
                    + "): stopping what still runs and starting it again, keeping the clusters' data"
                )
                self._stop_all()
            elif total:
                self._say(
                    f"found a crashed fleet in {self.state_dir} (none of its {total} processes "
                    "running): starting it again, keeping the clusters' data"
                )
            if light:
                light_mod.check_inotify(len(wanted) - 1)
            binaries = resolve_binaries(self._say)
            if node_shape is not None:
                self.node_shape = node_shape
            self.shape = shape
            self._assign_ports(wanted, base_port, light=light)
            started = time.monotonic()
            try:
                await FleetStartup(
                    self.state_dir,
                    self.clusters,
                    shapes=self.cluster_shapes(),
                    save=self._save,
                    say=self._say,
                ).run(binaries)
            except BaseException as error:
                self._say("stopping what was started ...")
                stopped = self._stop_all()
                self._save()
                if isinstance(error, FleetError):
                    raise FleetError(
                        f"{error}\n(stopped the {len(stopped)} processes this attempt had "
                        f"started; fix the cause, then run {self.command('up')} again)"
                    ) from error
                raise
            self._say(f"fleet up in {time.monotonic() - started:.1f}s")
            return True

    async def restart(self, name: str, component: str) -> ProcessRecord:
        """Stop one component of one cluster if it runs, and start it again alone, with the
        command line it last ran with (same ports, same data); its new record, once healthy.

        ``up`` on a broken fleet restarts every process of every cluster: this is for
        taking down one part (say, the manager's apiserver) and bringing back only it.
        """
        with self._locked():
            state = self.clusters.get(name)
            record = state.processes.get(component) if state is not None else None
            if state is None or record is None:
                raise FleetError(
                    f"no {component} recorded for cluster {name!r} in {self.state_dir}"
                )
            processes.stop([record])
            try:
                # A light worker's apiserver carries its environment on its command line.
                fresh = processes.spawn(
                    record.name, record.argv, Path(record.log),
                    env=None if state.light else cluster.ENVIRONMENT.get(component),
                )  # fmt: skip
            except OSError as error:
                raise FleetError(f"cannot start {record.name} again: {error}") from error
            state.processes[component] = fresh
            self._save()
        await wait_healthy(state, component, self.state_dir / "pki" / "ca.crt")
        return fresh

    async def _healthy_within(self, seconds: float) -> bool:
        """Healthy now, or - while every recorded process is alive - within ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            if await self.is_healthy():
                return True
            running, total = self.running_count()
            if not total or running < total or time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.5)

    def _stop_all(self) -> list[str]:
        """Stop every recorded process, stage by stage in reverse start order."""
        stage_of = {component: index for index, stage in enumerate(STAGES) for component in stage}
        by_stage: dict[int, list[ProcessRecord]] = {}
        for state in self.clusters.values():
            for component, record in state.processes.items():
                # A name no stage knows (from an older state file) is stopped last.
                by_stage.setdefault(stage_of.get(component, -1), []).append(record)
        stopped: list[str] = []
        for index in sorted(by_stage, reverse=True):
            stopped += processes.stop(by_stage[index])
        return stopped

    def _assign_ports(self, wanted: list[str], base_port: int, *, light: bool = False) -> None:
        """Reuse each cluster's recorded ports (etcd remembers its peer URL); pick new ones otherwise.

        Every port must be free before anything starts: a clash found here is
        one clear message, where a clash found by a component is a log to read.
        """
        previous = self.clusters
        per_cluster = len(cluster.PORT_NAMES)
        needed = len(wanted) * per_cluster
        fresh: list[int] = []
        # A fleet recorded by an older jobrelay lacks the ports of newer components.
        missing = {
            name: [p for p in cluster.PORT_NAMES if p not in previous[name].ports]
            for name in wanted
            if name in previous
        }
        if base_port:
            if base_port + needed - 1 > ports.HIGHEST_PORT:
                raise FleetError(
                    f"--base-port {base_port} leaves too few ports for {len(wanted)} clusters "
                    f"({per_cluster} each): choose one at most {ports.HIGHEST_PORT - needed + 1}"
                )
            fresh = list(range(base_port, base_port + needed))
        elif any(name not in previous for name in wanted) or any(missing.values()):
            kept = {port for state in previous.values() for port in state.ports.values()}
            try:
                fresh = ports.pick(needed, exclude=kept)
            except ValueError as error:  # JOBRELAY_FLEET_PORTS malformed or too narrow
                raise FleetError(str(error)) from None
        assigned: dict[str, dict[str, int]] = {}
        for index, name in enumerate(wanted):
            block = fresh[index * per_cluster : (index + 1) * per_cluster]
            if name in previous and not base_port:
                assigned[name] = {
                    port_name: previous[name].ports.get(port_name) or block.pop()
                    for port_name in cluster.PORT_NAMES
                }
            else:
                assigned[name] = dict(zip(cluster.PORT_NAMES, block, strict=True))
        taken = [
            f"  {port} ({name} {port_name}): {ports.describe_holder(port)}"
            for name, named_ports in assigned.items()
            for port_name, port in named_ports.items()
            if not ports.is_free(port)
        ]
        if taken:
            raise FleetError(self._ports_taken_message(taken, base_port, wanted, previous))
        self.clusters = {
            name: ClusterState(name, assigned[name], light=light and name != MANAGER)
            for name in wanted
        }
        self._save()

    def _ports_taken_message(
        self, taken: list[str], base_port: int, wanted: list[str], previous: dict[str, ClusterState]
    ) -> str:
        needed = len(wanted) * len(cluster.PORT_NAMES)
        # The suggested command must bring up the fleet asked for, not the default one.
        implied = len([name for name in previous if name != MANAGER]) or DEFAULT_WORKERS
        workers = len(wanted) - 1
        keep_workers = ["--workers", str(workers)] if workers != implied else []
        if self.shape is not None:  # a recorded configuration comes back by itself
            keep_workers = [] if previous else ["--config", "FILE"]
        suggestion = ports.free_block(needed)
        move = self.command("up", *keep_workers, "--base-port", str(suggestion or "N"))
        listing = "\n".join(taken)
        if base_port:
            low, high = ports.ephemeral_range()
            overlap = base_port <= high and base_port + needed - 1 >= low
            return (
                f"ports {base_port}-{base_port + needed - 1} (--base-port {base_port}) are not "
                f"all free:\n{listing}\nStop what holds them, or choose another base port, "
                f"e.g. {move}"
                + (
                    f" (ports {low}-{high} are the kernel's ephemeral range, which outgoing "
                    "connections take at random: a base port below it avoids such clashes)"
                    if overlap
                    else ""
                )
            )
        if previous:
            return (
                f"ports recorded for the fleet in {self._state_path} are not all free:\n"
                f"{listing}\nStop what holds them and run {self.command('up')} again, or move "
                f"the fleet to other ports, keeping its data: {move}"
            )
        return (
            f"ports picked for the fleet were taken before it could start:\n{listing}\n"
            f"Run {self.command('up')} again."
        )

    # --- down --------------------------------------------------------------

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every recorded process; with ``purge``, delete the state directory too.

        Returns the names of the processes that were still running.
        """
        if not self.state_dir.exists():
            return []
        if purge and not self._looks_like_state_dir():
            raise FleetError(
                f"{self.state_dir} holds no {STATE_FILE}, so it is not a fleet's state directory: "
                "not deleting it"
            )
        with self._locked():
            stopped = self._stop_all()
            for state in self.clusters.values():
                state.processes.clear()
            if self.clusters:
                self._save()
            if purge:
                # Under the lock, so that no `up` starts writing into what is being deleted.
                shutil.rmtree(self.state_dir)
                self.clusters = {}
        return stopped

    def _looks_like_state_dir(self) -> bool:
        # A directory that up created but stopped filling before state.json (say,
        # a binary was missing) holds only the lock file.
        return self._state_path.exists() or {p.name for p in self.state_dir.iterdir()} <= {".lock"}

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
            f"local fleet in {self.state_dir} (Kubernetes {K8S_VERSION}, "
            f"JobSet {JOBSET_VERSION}, KWOK nodes):"
        ]
        shapes = self.cluster_shapes()
        for name, state in self.clusters.items():
            lines.append(
                f"  {name:<10} https://127.0.0.1:{state.ports['apiserver']}  "
                f"{shapes[name].describe()}{'  light' if state.light else ''}  "
                f"kubeconfig {self.kubeconfig(name)}"
            )
        lines.append(f'  shell exports: eval "$({self.command("env").strip("`")})"')
        return "\n".join(lines)
