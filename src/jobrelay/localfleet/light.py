"""Light workers (`fleet up --light`): a kube-apiserver each, and nothing else of their own.

Every light worker's apiserver keeps its objects in ONE etcd shared by all light
workers, each under a prefix of its own (``/registry-light/<worker>``). The first
light worker's records hold that etcd and the one job stand-in process
(``python -m jobrelay.localfleet.jobstandin``) that plays the Job controller, the
scheduler, the kubelets and the garbage collector for every light worker's Jobs.
There is no kube-controller-manager, kube-scheduler, kwok or JobSet controller on a
light worker: its simulated nodes are made Ready once, at start, by ``fleet up``.

The apiservers are tuned to be cheap at 32 on two cores: one OS thread of Go each
(GOMAXPROCS=1), a tighter garbage collector, few requests in flight, no endpoint or
priority-and-fairness upkeep, only the API groups a worker is used through, and no
admission plugins that need a controller they will never get.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from jobrelay.localfleet.cluster_files import ClusterFiles
from jobrelay.localfleet.fleet_state import ClusterState, FleetError

ETCD = "etcd"
APISERVER = "kube-apiserver"
JOB_STANDIN = "job-standin"
ETCD_PREFIX_ROOT = "/registry-light"
PROGRESS_NOTIFY = "30s"
# What each apiserver process runs with: one Go thread, collect at +50% heap.
APISERVER_ENVIRONMENT = {"GOMAXPROCS": "1", "GOGC": "50"}
# Admission plugins whose work needs a controller a light worker lacks (quota usage is
# counted by kube-controller-manager: without it a quota'd namespace refuses every pod),
# or that only cost informers and memory here.
DISABLED_ADMISSION = (
    # It taints every new node not-ready until the node lifecycle controller (in
    # kube-controller-manager) lifts it: on a light worker nothing would.
    "TaintNodesByCondition",
    "ServiceAccount",
    "ResourceQuota",
    "LimitRanger",
    "PodSecurity",
    "DefaultStorageClass",
    "DefaultIngressClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "ClusterTrustBundleAttest",
)
# The API groups a light apiserver serves (--runtime-config, every other one off): what
# jobrelay, its credentials and the job stand-in use on a worker (core, batch, leases,
# RBAC, token and access reviews, priority classes, CRDs, events), and what the
# apiserver's own start needs (aggregation, admission registration, and the Service IP
# and EndpointSlice upkeep of networking and discovery). Each group off is storage, a
# watch cache and OpenAPI it never builds: a third less CPU to start, 15 % less memory.
SERVED_API_GROUPS = (
    "api/v1",
    "batch/v1",
    "coordination.k8s.io/v1",
    "rbac.authorization.k8s.io/v1",
    "authentication.k8s.io/v1",
    "authorization.k8s.io/v1",
    "scheduling.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    "events.k8s.io/v1",
    "apiregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1",
    "networking.k8s.io/v1",
    "discovery.k8s.io/v1",
)
# Flags of the full apiserver a light one replaces (by name) or drops. No aggregation
# layer: jobrelay's API is served on the manager only, and each of its files (front-proxy
# CA, client pair) costs an inotify instance (below).
_REPLACED = {
    "--etcd-servers",
    "--max-requests-inflight",
    "--max-mutating-requests-inflight",
    "--disable-admission-plugins",
    "--v",
    "--runtime-config",
    "--requestheader-client-ca-file",
    "--requestheader-allowed-names",
    "--requestheader-username-headers",
    "--requestheader-group-headers",
    "--requestheader-extra-headers-prefix",
    "--proxy-client-cert-file",
    "--proxy-client-key-file",
    "--enable-aggregator-routing",
}
# An apiserver watches each certificate file it reads with an inotify instance of its own:
# a full one holds 6, a light one 3 (client CA twice, serving pair). The kernel's per-user
# limit (fs.inotify.max_user_instances, 128 by default) is what bounds light workers on
# one machine, well before memory or CPU; the manager's components take about 10.
INOTIFY_PER_APISERVER = 3
INOTIFY_FOR_THE_REST = 10
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


def inotify_shortfall(light_workers: int, limit: int | None) -> str | None:
    """Why ``light_workers`` light apiservers cannot all start under the kernel's inotify
    ``limit`` (None: unknown, assumed enough); None when they can."""
    needed = light_workers * INOTIFY_PER_APISERVER + INOTIFY_FOR_THE_REST
    if limit is None or needed <= limit:
        return None
    most = max(0, (limit - INOTIFY_FOR_THE_REST) // INOTIFY_PER_APISERVER)
    return (
        f"{light_workers} light workers need about {needed} inotify instances, and this "
        f"machine allows {limit} per user (fs.inotify.max_user_instances): ask for at most "
        f"{most}, or raise the limit (sysctl -w fs.inotify.max_user_instances=512)"
    )


def check_inotify(light_workers: int) -> None:
    """FleetError when this machine's inotify limit cannot hold ``light_workers``."""
    try:
        limit: int | None = int(INOTIFY_LIMIT.read_text())
    except (OSError, ValueError):
        limit = None
    if (shortfall := inotify_shortfall(light_workers, limit)) is not None:
        raise FleetError(shortfall)


def light_asked(
    asked: bool | None, clusters: Mapping[str, ClusterState], *, configured: bool, purge: str
) -> bool:
    """Whether `up` makes light workers: as ``asked``, else as the recorded fleet; FleetError
    when that contradicts the recorded fleet or a configuration file (``configured``).
    ``purge``: where the fleet is and the command that removes it, for the message."""
    recorded = any(state.light for state in clusters.values())
    if configured and asked:
        raise FleetError("light workers are worker-N clusters of one node shape: "
                         "give --light no fleet configuration")  # fmt: skip
    light = recorded if asked is None else asked
    if clusters and light != recorded:
        made = "light" if recorded else "full"
        raise FleetError(f"{purge} removes it for a new one: it has {made} workers")
    return light


def etcd_prefix(worker: str) -> str:
    return f"{ETCD_PREFIX_ROOT}/{worker}"


def components(*, hosts_shared: bool) -> tuple[str, ...]:
    """What a light worker runs: its apiserver; the first one also the shared etcd and the
    job stand-in."""
    return (ETCD, APISERVER, JOB_STANDIN) if hosts_shared else (APISERVER,)


def apiserver_command(full: list[str], *, worker: str, etcd_client_port: int) -> list[str]:
    """The light worker's apiserver command line: the full one's (certificates, ports,
    aggregation, RBAC), on the shared etcd under the worker's prefix, and tuned."""
    kept = [arg for arg in full[1:] if arg.split("=", 1)[0] not in _REPLACED]
    env = shutil.which("env") or "/usr/bin/env"
    return [
        # Through env(1), which execs the apiserver in place: the recorded command line
        # carries the environment, so `restart` brings the process back just as tuned.
        env,
        *(f"{key}={value}" for key, value in APISERVER_ENVIRONMENT.items()),
        full[0],
        *kept,
        f"--etcd-servers=http://127.0.0.1:{etcd_client_port}",
        f"--etcd-prefix={etcd_prefix(worker)}",
        f"--disable-admission-plugins={','.join(DISABLED_ADMISSION)}",
        "--max-requests-inflight=100",
        "--max-mutating-requests-inflight=50",
        "--enable-priority-and-fairness=false",
        "--runtime-config="
        + ",".join(["api/all=false", *(f"{g}=true" for g in SERVED_API_GROUPS)]),
        # No Endpoints of the "kubernetes" Service rewritten every 10 s by each apiserver.
        "--endpoint-reconciler-type=none",
        # Events of a fake cluster are worth an hour, not the default's.
        "--event-ttl=10m",
        "--v=0",
    ]


def standin_command(kubeconfigs: Mapping[str, Path]) -> list[str]:
    """The one job stand-in process for every light worker."""
    argv = [sys.executable, "-m", "jobrelay.localfleet.jobstandin"]
    for name, path in kubeconfigs.items():
        argv += ["--cluster", f"{name}={path}"]
    return argv


def light_commands(
    full: Mapping[str, list[str]],
    *,
    worker: str,
    host: ClusterFiles | None,
    etcd_client_port: int,
    standin_kubeconfigs: Mapping[str, Path],
) -> dict[str, list[str]]:
    """The command lines of one light worker, from its full cluster's (``full``); ``host``
    is given for the light worker that hosts the shared etcd and the stand-in."""
    commands = {
        APISERVER: apiserver_command(
            full[APISERVER], worker=worker, etcd_client_port=etcd_client_port
        )
    }
    if host is not None:
        # Progress notifications move each apiserver's watch caches on while its worker is
        # quiet, so that watchers get their bookmarks (etcd's default: every 10 minutes).
        commands[ETCD] = [
            *full[ETCD],
            f"--experimental-watch-progress-notify-interval={PROGRESS_NOTIFY}",
        ]
        commands[JOB_STANDIN] = standin_command(standin_kubeconfigs)
    return commands
