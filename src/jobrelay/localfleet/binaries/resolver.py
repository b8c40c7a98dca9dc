"""Every binary a local fleet runs, found (or built, when missing) in one call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jobrelay.localfleet.binaries import Progress
from jobrelay.localfleet.binaries.autoscaler_crds import autoscaler_crds
from jobrelay.localfleet.binaries.chart_crds import chart_crds
from jobrelay.localfleet.binaries.ecosystem_crds import ecosystem_crds
from jobrelay.localfleet.binaries.etcd_binary import etcd
from jobrelay.localfleet.binaries.helm_binary import helm
from jobrelay.localfleet.binaries.inventory_crds import inventory_crds
from jobrelay.localfleet.binaries.jobset_build import jobset
from jobrelay.localfleet.binaries.kube_binaries import kubernetes_dir
from jobrelay.localfleet.binaries.kwok_binary import kwok
from jobrelay.localfleet.binaries.promtool_binary import promtool


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path
    kwok: Path
    jobset_controller: Path
    # The JSON file of the manifests matching jobset_controller (see JOBSET_MANIFESTS).
    jobset_manifests: Path


def resolve(progress: Progress = print, *, build: bool = True) -> Binaries:
    """Locate every binary, building what is missing when ``build`` is true."""
    k8s_dir = kubernetes_dir(progress, build=build)
    etcd_binary = etcd()
    kwok_binary = kwok(progress, build=build)
    jobset_controller, jobset_manifests = jobset(progress, build=build)
    return Binaries(
        kube_apiserver=k8s_dir / "kube-apiserver",
        kube_controller_manager=k8s_dir / "kube-controller-manager",
        kube_scheduler=k8s_dir / "kube-scheduler",
        etcd=etcd_binary,
        kwok=kwok_binary,
        jobset_controller=jobset_controller,
        jobset_manifests=jobset_manifests,
    )


@dataclass(frozen=True)
class Tools:
    """What the tests use besides the fleet: helm of both majors, for the chart, the
    third-party CRDs its optional objects need (a JSON list, see chart_crds), promtool,
    for the alert rules, and the ecosystem's CRDs the e2e tests dispatch (a JSON list, see
    ecosystem_crds), and cluster-autoscaler's ProvisioningRequest CRD (autoscaler_crds; a
    fleet with a stand-in autoscaler fetches it itself too)."""

    helm: Path
    helm4: Path
    chart_crds: Path
    promtool: Path
    ecosystem_crds: Path
    autoscaler_crds: Path
    # The ClusterProfile CRD, for the tests of workers from ClusterProfiles (inventory_crds).
    inventory_crds: Path


def resolve_tools(progress: Progress = print, *, build: bool = True) -> Tools:
    return Tools(
        helm=helm(progress, build=build, major=3),
        helm4=helm(progress, build=build, major=4),
        chart_crds=chart_crds(progress, build=build),
        promtool=promtool(progress, build=build),
        ecosystem_crds=ecosystem_crds(progress, build=build),
        autoscaler_crds=autoscaler_crds(progress, build=build),
        inventory_crds=inventory_crds(progress, build=build),
    )
