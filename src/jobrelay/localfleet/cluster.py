"""One local cluster: its files on disk and the command lines of its components.

A cluster is etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
kwok (simulated nodes and pods) and the JobSet controller (see ``jobset_controller``), all
on 127.0.0.1, with TLS from the fleet's CA and RBAC on.

Clients authenticate with a client certificate or a static bearer token: each
cluster has a kubeconfig per :class:`~jobrelay.localfleet.cluster_files.Credential`.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import yaml

from jobrelay.localfleet import image_refusals, jobset_controller, pki
from jobrelay.localfleet.binaries.resolver import Binaries
from jobrelay.localfleet.cluster_files import ClusterFiles, Credential
from jobrelay.localfleet.shape import MANAGER

SERVICE_CIDR = "10.96.0.0/16"
# The CN of each apiserver's front-proxy client certificate: the only name an aggregated
# API (jobrelay's api.jobrelay.dev) accepts forwarded users from.
FRONT_PROXY_CLIENT = "front-proxy-client"
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    jobset_controller.COMPONENT,
)
PORT_NAMES = (
    "etcd-client",
    "etcd-peer",
    "apiserver",
    "controller-manager",
    "scheduler",
    "kwok",
    *jobset_controller.PORT_NAMES,
)
KWOK_STAGES = Path(__file__).with_name("kwok-stages.yaml")
# Belt and braces with the apiserver's WatchList=false: kwok's client-go should
# not even ask for streaming lists.
ENVIRONMENT = {"kwok": {"KUBE_FEATURE_WatchListClient": "false"}}


TOKEN_USERS = {
    Credential.TOKEN: pki.TokenUser("jobrelay-token-admin", ("system:masters",)),
    Credential.NO_RIGHTS_TOKEN: pki.TokenUser("jobrelay-no-rights"),
}


def write_kubeconfig(
    path: Path,
    *,
    cluster: str,
    server: str,
    ca: Path,
    client: pki.CertPair | None = None,
    token: str | None = None,
) -> None:
    """A kubeconfig with one context, authenticating with ``client`` or ``token``."""
    if (client is None) == (token is None):
        raise ValueError("a kubeconfig needs exactly one of a client certificate and a token")
    user = (
        {"token": token}
        if client is None
        else {"client-certificate": str(client.cert), "client-key": str(client.key)}
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": f"{cluster}-user", "user": user}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-user"}}],
        "current-context": cluster,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)  # private before a credential is written into it
    path.chmod(0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def prepare(
    files: ClusterFiles, *, ca: pki.CertPair, admin: pki.CertPair, ports: dict[str, int]
) -> None:
    """Write certificates and kubeconfigs; existing keys are kept across restarts."""
    server = f"https://127.0.0.1:{ports['apiserver']}"
    pki.issue(
        ca,
        files.pki,
        "apiserver",
        common_name="kube-apiserver",
        server_hosts=("127.0.0.1", "localhost", "10.96.0.1", "kubernetes.default.svc"),
    )
    pki.ensure_service_account_key(files.pki)
    # The aggregation layer: a CA of its own (as kubeadm's front-proxy-ca), apart from the
    # one users' certificates come from, and the certificate the apiserver forwards with.
    front_proxy_ca = pki.ensure_ca(files.front_proxy_pki, common_name="front-proxy-ca")
    pki.issue(front_proxy_ca, files.front_proxy_pki, "client", common_name=FRONT_PROXY_CLIENT)
    identities = {
        "kube-controller-manager": pki.issue(
            ca, files.pki, "controller-manager", common_name="system:kube-controller-manager"
        ),
        "kube-scheduler": pki.issue(
            ca, files.pki, "scheduler", common_name="system:kube-scheduler"
        ),
        jobset_controller.COMPONENT: pki.issue(
            ca, files.pki, jobset_controller.COMPONENT, common_name=jobset_controller.USER
        ),
    }
    for component, identity in identities.items():
        write_kubeconfig(
            files.kubeconfig(component),
            cluster=files.name,
            server=server,
            ca=ca.cert,
            client=identity,
        )
    write_kubeconfig(
        files.admin_kubeconfig, cluster=files.name, server=server, ca=ca.cert, client=admin
    )
    tokens = pki.ensure_static_tokens(files.token_file, list(TOKEN_USERS.values()))
    for credential, user in TOKEN_USERS.items():
        write_kubeconfig(
            files.credential_kubeconfig(credential),
            cluster=files.name,
            server=server,
            ca=ca.cert,
            token=tokens[user.name],
        )
    scheduler_config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(files.kubeconfig("kube-scheduler")),
            "qps": 200,
            "burst": 400,
        },
        "leaderElection": {"leaderElect": False},
    }
    (files.root / "scheduler.yaml").write_text(yaml.safe_dump(scheduler_config))
    jobset_controller.prepare(files, ca=ca, ports=ports)
    # kwok's server is each node's "kubelet": the apiserver proxies pods/log to it over
    # HTTPS (it does not verify a kubelet's certificate without --kubelet-certificate-authority).
    pki.issue(ca, files.pki, "kwok", common_name="kwok", server_hosts=("127.0.0.1", "localhost"))
    write_simulated_logs(files)
    files.kwok_stages.write_text(image_refusals.stages_for(files.name, KWOK_STAGES))


# What every simulated pod prints (a KWOK pod runs nothing): its pods/log, and the log
# of a "previous" container (--previous). kwok reads them as a container runtime's
# (CRI) log files; a follow (-f) stays open until the reader ends it.
SIMULATED_LOG = ("simulated pod started", "working", "done")
SIMULATED_PREVIOUS_LOG = ("previous container started", "previous container failed")


def _cri_log(lines: tuple[str, ...]) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    return "".join(f"{now} stdout F {line}\n" for line in lines)


def write_simulated_logs(files: ClusterFiles) -> None:
    directory = files.root / "kwok"
    directory.mkdir(parents=True, exist_ok=True)
    current, previous = directory / "pod.log", directory / "previous.log"
    current.write_text(_cri_log(SIMULATED_LOG))
    previous.write_text(_cri_log(SIMULATED_PREVIOUS_LOG))
    cluster_logs = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "jobrelay-fleet-logs"},
        "spec": {
            "selector": {},  # every pod of every namespace
            "logs": [{"logsFile": str(current), "previousLogsFile": str(previous), "follow": True}],
        },
    }
    files.kwok_logs.write_text(yaml.safe_dump(cluster_logs, sort_keys=False))


def commands(
    files: ClusterFiles, binaries: Binaries, *, ca: Path, ports: dict[str, int]
) -> dict[str, list[str]]:
    """The command line of every component, keyed by component name."""
    etcd_client = f"http://127.0.0.1:{ports['etcd-client']}"
    etcd_peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    tls = files.pki
    kcm_kubeconfig = str(files.kubeconfig("kube-controller-manager"))
    scheduler_kubeconfig = str(files.kubeconfig("kube-scheduler"))
    return {
        "etcd": [
            str(binaries.etcd),
            f"--name={files.name}",
            f"--data-dir={files.etcd_data}",
            f"--listen-client-urls={etcd_client}",
            f"--advertise-client-urls={etcd_client}",
            f"--listen-peer-urls={etcd_peer}",
            f"--initial-advertise-peer-urls={etcd_peer}",
            f"--initial-cluster={files.name}={etcd_peer}",
            "--logger=zap",
            "--log-level=warn",
            # Keeps memory small: the apiserver compacts history itself every 5 minutes.
            "--snapshot-count=10000",
            "--quota-backend-bytes=2147483648",
        ],
        "kube-apiserver": [
            str(binaries.kube_apiserver),
            f"--etcd-servers={etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['apiserver']}",
            f"--tls-cert-file={tls / 'apiserver.crt'}",
            f"--tls-private-key-file={tls / 'apiserver.key'}",
            f"--client-ca-file={ca}",
            f"--token-auth-file={files.token_file}",
            f"--service-account-key-file={tls / 'sa.pub'}",
            f"--service-account-signing-key-file={tls / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            # The aggregation layer, as kubeadm sets it up: aggregated APIs trust only
            # requests forwarded with this client certificate (the user in these headers).
            f"--requestheader-client-ca-file={files.front_proxy_pki / 'ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={files.front_proxy_pki / 'client.crt'}",
            f"--proxy-client-key-file={files.front_proxy_pki / 'client.key'}",
            # To a Service's endpoints rather than its ClusterIP (there is no kube-proxy).
            "--enable-aggregator-routing=true",
            # Nodes' names do not resolve; their InternalIP is kwok's server (pods/log).
            "--kubelet-preferred-address-types=InternalIP",
            # Workers: simulated pods mount no token, and without this plugin a Job's
            # first pods in a fresh namespace don't wait for the "default" ServiceAccount
            # to appear. The manager keeps it, as every real one does: jobrelay's
            # admission probe asks it whether a workload's ServiceAccount exists.
            *(["--disable-admission-plugins=ServiceAccount"] if files.name != MANAGER else []),
            "--allow-privileged=true",
            "--max-requests-inflight=800",
            "--max-mutating-requests-inflight=400",
            "--profiling=false",
            # Streaming lists need etcd's RequestWatchProgress (etcd 3.4.31+); Debian's
            # etcd 3.4.23 lacks it, and some clients (kwok) then lose watch events
            # instead of falling back. Plain list+watch is what every client supports.
            "--feature-gates=WatchList=false",
            "--v=1",
        ],
        "kube-controller-manager": [
            str(binaries.kube_controller_manager),
            f"--kubeconfig={kcm_kubeconfig}",
            f"--authentication-kubeconfig={kcm_kubeconfig}",
            f"--authorization-kubeconfig={kcm_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['controller-manager']}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={tls / 'sa.key'}",
            f"--root-ca-file={ca}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # The default 20 QPS would make the worker's own Job controller the
            # bottleneck of every throughput measurement.
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
            "--v=1",
        ],
        "kube-scheduler": [
            str(binaries.kube_scheduler),
            f"--config={files.root / 'scheduler.yaml'}",
            f"--authentication-kubeconfig={scheduler_kubeconfig}",
            f"--authorization-kubeconfig={scheduler_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['scheduler']}",
            "--profiling=false",
            "--v=1",
        ],
        "kwok": [
            str(binaries.kwok),
            f"--kubeconfig={files.admin_kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-label-selector=type=kwok",
            f"--config={files.kwok_stages}",
            f"--config={files.kwok_logs}",
            f"--server-address=127.0.0.1:{ports['kwok']}",
            f"--tls-cert-file={tls / 'kwok.crt'}",
            f"--tls-private-key-file={tls / 'kwok.key'}",
            # Each node's kubelet endpoint (status.daemonEndpoints, addresses) is this server.
            "--node-ip=127.0.0.1",
            f"--node-port={ports['kwok']}",
            "--node-lease-duration-seconds=40",
            # Room for the pod IPs of thousands of short-lived benchmark pods.
            "--cidr=10.0.0.1/16",
        ],
        jobset_controller.COMPONENT: jobset_controller.command(files, binaries.jobset_controller),
    }


def health_urls(ports: dict[str, int]) -> dict[str, str]:
    """Where each component answers whether it is healthy."""
    return {
        "etcd": f"http://127.0.0.1:{ports['etcd-client']}/health",
        "kube-apiserver": f"https://127.0.0.1:{ports['apiserver']}/readyz",
        "kube-controller-manager": f"https://127.0.0.1:{ports['controller-manager']}/healthz",
        "kube-scheduler": f"https://127.0.0.1:{ports['scheduler']}/healthz",
        "kwok": f"https://127.0.0.1:{ports['kwok']}/healthz",
        jobset_controller.COMPONENT: jobset_controller.health_url(ports),
    }
