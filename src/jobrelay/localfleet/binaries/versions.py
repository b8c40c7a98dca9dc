"""The releases a local fleet runs: one place for every pinned version."""

from __future__ import annotations

K8S_VERSION = "v1.35.4"
K8S_STAGING_VERSION = "v0.35.4"
KWOK_VERSION = "v0.7.0"
# v0.11.0 rather than v0.10.1 (the proxy serves both): it is built against k8s.io
# v0.35, the fleet's Kubernetes minor (v0.10.1: v0.34); both skip JobSets whose
# spec.managedBy names another controller, as releases since at least v0.5 do.
JOBSET_VERSION = "v0.11.0"
JOBSET_MODULE = "sigs.k8s.io/jobset"
# The chart is tested with both majors (Helm 4 renders Helm 3 charts; apiVersion v2).
HELM_VERSIONS = {3: "v3.22.0", 4: "v4.3.1"}
# promtool checks and tests the alert rules; Prometheus 3.16.0 is module version v0.316.0.
PROMTOOL_VERSION = "v3.16.0"
PROMTOOL_MODULE_VERSION = "v0.316.0"


def minor_of(version: str) -> str:
    """``v1.35.4`` -> ``v1.35``: any patch release of the minor works."""
    return version.rsplit(".", 1)[0]


# The CRDs the chart's optional objects need on the chart tests' manager: the
# ServiceMonitor, PodMonitor and PrometheusRule of the Prometheus operator and
# cert-manager's Certificate and issuers (from their Go modules, as the proxy serves them).
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"
CERT_MANAGER_VERSION = "v1.21.2"

# The ecosystem's batch kinds the e2e tests dispatch (their CRDs, from their Go modules):
# KubeRay's RayJob and RayCluster, Kubeflow Trainer's TrainJob, the training operator's
# PyTorchJob (its v1 MPIJob would clash with the MPI operator's) and MPIJob v2beta1.
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
KUBERAY_VERSION = "v1.5.0"
TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
TRAINER_VERSION = "v2.0.0"
TRAINING_OPERATOR_MODULE = "github.com/kubeflow/training-operator"
TRAINING_OPERATOR_VERSION = "v1.9.0"
MPI_OPERATOR_MODULE = "github.com/kubeflow/mpi-operator"
MPI_OPERATOR_VERSION = "v0.7.0"

# cluster-autoscaler's ProvisioningRequest CRD, for the workers with a stand-in autoscaler.
# The Go module proxy serves this module at this pseudo-version (the one Kueue pins) and
# refuses the newer ones here: its CRD serves v1beta1 alone, with the schema v1 kept
# unchanged (autoscaler_crds.served_as_v1 adds v1 the way the newer CRD lists it).
AUTOSCALER_APIS_MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
AUTOSCALER_APIS_VERSION = "v0.0.0-20240627115740-d52e4b9665d7"

# SIG-Multicluster's ClusterProfile (KEP-4322), whose CRD the e2e tests of workers from
# ClusterProfiles install on the manager (a cluster manager's in a real fleet).
CLUSTER_INVENTORY_MODULE = "sigs.k8s.io/cluster-inventory-api"
CLUSTER_INVENTORY_VERSION = "v0.1.2"
