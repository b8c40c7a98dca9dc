"""Starting a local fleet's components: each stage on every cluster at once, each
component waited for until healthy, and the JobSet controller once its CRD, RBAC
and webhooks are installed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.probes import probe
from jobrelay.localfleet import (
    autoscaled_workers,
    cluster,
    jobset_controller,
    light,
    nodes,
    pki,
    processes,
)
from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.resolver import Binaries
from jobrelay.localfleet.cluster_files import ClusterFiles
from jobrelay.localfleet.fleet_state import ClusterState, FleetError
from jobrelay.localfleet.processes import ProcessRecord
from jobrelay.localfleet.shape import MANAGER, ClusterShape

STARTUP_TIMEOUT = 90.0
PER_CLUSTER_STARTUP = 5.0
# Health polls back off from the first interval to the longest: each poll of an
# apiserver is a TLS handshake on both sides, and thirty-odd starting at once on two
# cores are slowed by being asked five times a second each.
FIRST_POLL_INTERVAL = 0.2
LONGEST_POLL_INTERVAL = 1.0
# Processes of one stage (etcds, apiservers) starting at once.
STARTING_AT_ONCE = 6
# Start order, stage by stage; stopping goes in reverse, so that each component
# can still reach what it depends on while it shuts down (an apiserver whose
# etcd is gone waits out its whole grace period). The JobSet controller starts
# last within its stage: only once its CRD, RBAC and webhooks are installed; so does
# an autoscaled worker's stand-in autoscaler, once its nodes and CRD are there.
STAGES = (
    ("etcd",),
    ("kube-apiserver",),
    ("kube-controller-manager", "kube-scheduler", "kwok", light.JOB_STANDIN,
     jobset_controller.COMPONENT, autoscaled_workers.AUTOSCALER),
)  # fmt: skip
# Started on their own, after the rest of the last stage.
_STARTED_LATER = (jobset_controller.COMPONENT, autoscaled_workers.AUTOSCALER)


class FleetStartup:
    """One start of the recorded clusters' components, each process recorded (and saved)
    the moment it is spawned, so that `down` finds it whatever happens next."""

    def __init__(
        self,
        state_dir: Path,
        clusters: dict[str, ClusterState],
        *,
        shapes: dict[str, ClusterShape],
        save: Callable[[], None],
        say: Progress,
    ) -> None:
        self.state_dir = state_dir
        self.clusters = clusters
        self._shapes = shapes
        self._save = save
        self._say = say

    def files(self, name: str) -> ClusterFiles:
        return ClusterFiles(self.state_dir, name)

    async def run(self, binaries: Binaries) -> None:
        """Start every cluster's components, stage by stage; FleetError when one fails."""
        pki_dir = self.state_dir / "pki"
        ca = pki.ensure_ca(pki_dir)
        admin = pki.issue(
            ca, pki_dir, "admin", common_name="jobrelay-admin", organization="system:masters"
        )
        argv: dict[str, dict[str, list[str]]] = {}
        host = light_host(self.clusters)
        for name, state in self.clusters.items():
            files = self.files(name)
            cluster.prepare(files, ca=ca, admin=admin, ports=state.ports)
            argv[name] = cluster.commands(files, binaries, ca=ca.cert, ports=state.ports)
            if state.light and host is not None:
                argv[name] = light.light_commands(
                    argv[name],
                    worker=name,
                    host=files if name == host else None,
                    etcd_client_port=self.clusters[host].ports["etcd-client"],
                    standin_kubeconfigs={
                        other: self.files(other).admin_kubeconfig
                        for other, other_state in self.clusters.items()
                        if other_state.light
                    },
                )
        # Each stage starts on every cluster, a few processes at a time: an apiserver's
        # start-up is what costs, a few overlap well even on two cores, and thirty-odd
        # at once each take half as much CPU again, fighting over the cores.
        *first_stages, last_stage = STAGES
        for stage in first_stages:
            self._say(f"starting {', '.join(stage)} on {len(self.clusters)} clusters ...")
            await self._start_stage_in_turn(stage, argv, ca.cert)
        # The last stage runs two branches side by side: the built-in components
        # and then nodes, and the JobSet controller, which must wait for its CRD.
        core = tuple(component for component in last_stage if component not in _STARTED_LATER)
        self._say(
            f"starting {', '.join(core)} on {len(self.clusters)} clusters, and "
            f"{jobset_controller.COMPONENT} once its CRD, RBAC and webhooks are installed ..."
        )
        self._spawn_stage(core, argv)

        async def core_then_nodes() -> None:
            await self._wait_stage(core, ca.cert)
            self._say("creating simulated nodes and registering workers ...")
            await self._prepare_nodes()
            await self._start_autoscalers()

        async def controller_once_installed() -> None:
            await self._install_jobset(binaries, ca.cert)
            self._spawn_stage((jobset_controller.COMPONENT,), argv)
            await self._wait_stage((jobset_controller.COMPONENT,), ca.cert)
            await all_or_first_error(
                [self._check_jobset_webhooks(name, ca.cert, admin) for name in self._full()]
            )

        await all_or_first_error([core_then_nodes(), controller_once_installed()])

    @property
    def _timeout(self) -> float:
        # Thirty-odd apiservers starting at once on two cores take their time.
        return max(STARTUP_TIMEOUT, PER_CLUSTER_STARTUP * len(self.clusters))

    def _full(self) -> list[str]:
        """The clusters that run every component (all but the light workers)."""
        return [name for name, state in self.clusters.items() if not state.light]

    def _spawn_stage(self, stage: tuple[str, ...], argv: dict[str, dict[str, list[str]]]) -> None:
        for name, state in self.clusters.items():
            # A light worker runs only some components (light.py).
            for component in (c for c in stage if c in argv[name]):
                state.processes[component] = self._spawn(name, component, argv[name])
                # Recorded at once: if we die now, `down` still finds this process.
                self._save()

    async def _start_stage_in_turn(
        self, stage: tuple[str, ...], argv: dict[str, dict[str, list[str]]], ca: Path
    ) -> None:
        """Start ``stage`` on every cluster, at most STARTING_AT_ONCE processes starting
        at a time: the next is spawned when one answers healthy."""
        starting = asyncio.Semaphore(STARTING_AT_ONCE)

        async def start(name: str, state: ClusterState, component: str) -> None:
            async with starting:
                state.processes[component] = self._spawn(name, component, argv[name])
                self._save()  # recorded at once: if we die now, `down` still finds it
                await wait_healthy(state, component, ca, timeout=self._timeout)

        await all_or_first_error(
            [
                start(name, state, component)
                for name, state in self.clusters.items()
                for component in stage
                if component in argv[name]
            ]
        )

    async def _wait_stage(self, stage: tuple[str, ...], ca: Path) -> None:
        await all_or_first_error(
            [
                wait_healthy(state, component, ca, timeout=self._timeout)
                for state in self.clusters.values()
                for component in stage
                if component in state.processes
            ]
        )

    async def _install_jobset(self, binaries: Binaries, ca: Path) -> None:
        """The JobSet CRD, RBAC and webhook configurations, on every cluster at once."""
        try:
            manifests = jobset_controller.Manifests.load(binaries.jobset_manifests)
        except jobset_controller.JobSetError as error:
            raise FleetError(str(error)) from error

        async def install(name: str, state: ClusterState) -> None:
            kubeconfig = self.files(name).admin_kubeconfig
            async with ApiClient.from_kubeconfig(kubeconfig, cluster=name) as client:
                try:
                    await jobset_controller.install(
                        client, manifests, ca=ca, webhook_port=state.ports["jobset-webhook"]
                    )
                except (ApiError, jobset_controller.JobSetError) as error:
                    raise FleetError(
                        f"{name}: cannot install JobSet {manifests.version}'s CRD, RBAC and "
                        f"webhooks: {error}"
                    ) from error

        await all_or_first_error([install(name, self.clusters[name]) for name in self._full()])

    async def _prepare_nodes(self) -> None:
        try:
            await nodes.prepare_clusters(
                {name: self.files(name).admin_kubeconfig for name in self.clusters},
                manager=MANAGER,
                shapes=self._shapes,
                light={name for name, state in self.clusters.items() if state.light},
            )
        except nodes.NodesNotReady as error:
            raise FleetError(f"{error}: see {self.files(error.cluster).log('kwok')}") from error

    async def _start_autoscalers(self) -> None:
        """On each autoscaled worker (not a light one: no kwok makes its nodes Ready), the
        ProvisioningRequest CRD, then the stand-in autoscaler."""
        wanted = {
            name: shape.autoscaler
            for name, shape in self._shapes.items()
            if shape.autoscaler is not None and name in self.clusters
            and not self.clusters[name].light
        }  # fmt: skip
        skipped = [
            name for name, shape in self._shapes.items()
            if shape.autoscaler is not None and name in self.clusters and self.clusters[name].light
        ]  # fmt: skip
        if skipped:
            self._say(f"no stand-in autoscaler on light workers: {', '.join(skipped)}")
        if not wanted:
            return
        self._say(f"starting the stand-in autoscaler on {', '.join(wanted)} ...")
        try:
            crd = autoscaled_workers.provisioning_crd(self._say)
            for name, shape in wanted.items():
                kubeconfig = self.files(name).admin_kubeconfig
                async with ApiClient.from_kubeconfig(kubeconfig, cluster=name) as client:
                    await autoscaled_workers.install_provisioning_crd(client, crd)
                argv = {
                    autoscaled_workers.AUTOSCALER: autoscaled_workers.autoscaler_command(
                        kubeconfig, name, shape
                    )
                }
                state = self.clusters[name]
                state.processes[autoscaled_workers.AUTOSCALER] = self._spawn(
                    name, autoscaled_workers.AUTOSCALER, argv
                )
                self._save()
        except (ApiError, BinaryError) as error:
            raise FleetError(f"cannot start the stand-in autoscaler: {error}") from error
        for name in wanted:
            await wait_healthy(self.clusters[name], autoscaled_workers.AUTOSCALER, Path("/"))

    async def _check_jobset_webhooks(self, name: str, ca: Path, admin: pki.CertPair) -> None:
        state = self.clusters[name]
        try:
            await jobset_controller.check_webhooks(
                f"https://127.0.0.1:{state.ports['apiserver']}", ca=ca, client_cert=admin
            )
        except jobset_controller.JobSetError as error:
            record = state.processes[jobset_controller.COMPONENT]
            raise FleetError(
                f"{name}: {error}; {record.name}'s log {record.log} ends:\n"
                + processes.log_tail(record)
            ) from error

    def _spawn(self, name: str, component: str, argv: dict[str, list[str]]) -> ProcessRecord:
        log = self.files(name).log(component)
        try:
            return processes.spawn(
                f"{name}/{component}", argv[component], log, env=cluster.ENVIRONMENT.get(component)
            )
        except OSError as error:
            raise FleetError(
                f"cannot start {name}/{component} ({argv[component][0]}): {error}"
            ) from error


def light_host(clusters: dict[str, ClusterState]) -> str | None:
    """The light worker whose records hold the shared etcd and the job stand-in: the first."""
    return next((name for name, state in clusters.items() if state.light), None)


def components_of(name: str, clusters: dict[str, ClusterState]) -> tuple[str, ...]:
    """What cluster ``name`` runs: every component, or a light worker's few; and its
    stand-in autoscaler once started (`fleet status` shows it, a dead one is a crash)."""
    state = clusters[name]
    found = (
        cluster.COMPONENTS
        if not state.light
        else light.components(hosts_shared=name == light_host(clusters))
    )
    return (
        (*found, autoscaled_workers.AUTOSCALER)
        if autoscaled_workers.AUTOSCALER in state.processes
        else found
    )


def health_url(state: ClusterState, component: str) -> str | None:
    """Where ``component`` answers whether it is healthy; None: its process running is all."""
    return cluster.health_urls(state.ports).get(component)


async def wait_healthy(
    state: ClusterState, component: str, ca: Path, *, timeout: float = STARTUP_TIMEOUT
) -> None:
    """Until ``component`` of ``state``'s cluster answers healthy; FleetError when its process
    exits first or ``timeout`` passes."""
    record = state.processes[component]
    url = health_url(state, component)
    deadline = time.monotonic() + timeout
    detail = ""
    interval = FIRST_POLL_INTERVAL
    while time.monotonic() < deadline:
        code = processes.exit_status(record)
        if code is not None or not processes.is_running(record):
            how = f"with code {code}" if code is not None else "(exit code unknown)"
            raise FleetError(
                f"{record.name} exited {how} while starting; its log {record.log} ends:\n"
                + processes.log_tail(record)
            )
        ok, detail = (True, "running") if url is None else await probe(url, ca=ca)
        if ok:
            return
        await asyncio.sleep(interval)
        interval = min(interval * 1.5, LONGEST_POLL_INTERVAL)
    raise FleetError(
        f"{record.name} did not become healthy within {timeout:.0f}s ({detail}); "
        f"its log {record.log} ends:\n{processes.log_tail(record)}"
    )


async def all_or_first_error(waits: list[Coroutine[Any, Any, None]]) -> None:
    """Await every coroutine; on the first failure cancel the others and raise it.

    Unlike a bare gather, no sibling keeps polling a fleet that is being
    stopped, and unlike a TaskGroup the error is not wrapped in a group.
    """
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
