"""The resources jobrelay reads and writes besides its workload kinds, and their URLs.

A workload kind names its own :class:`~jobrelay.vocabulary.resource.Resource`
(``WorkloadKind.ref``); the client takes either as it is.
"""

from __future__ import annotations

from urllib.parse import quote

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "API_SERVICES",
    "CLUSTER_PROFILES",
    "CONFIGMAPS",
    "CRDS",
    "ENDPOINT_SLICES",
    "EVENTS",
    "JOBS",
    "LEASES",
    "MUTATING_WEBHOOK_CONFIGURATIONS",
    "NAMESPACES",
    "NODES",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "PRIORITY_CLASSES",
    "RELAY_QUEUES",
    "RESOURCE_QUOTAS",
    "SECRETS",
    "SELF_SUBJECT_REVIEWS",
    "SERVICES",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "VERSION",
    "WORKER_CLUSTERS",
    "resource_path",
]

# The batch/v1 Job, as its adapter names it (tests and benchmarks use it).
JOBS = JobKind.ref
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
PERSISTENT_VOLUME_CLAIMS = Resource(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True
)
# Fleet-wide queues read a workload's priority and its namespace's quota on the manager.
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False
)
# Who a credential is, as its apiserver sees it (a worker's: the namespace of its account).
SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
# Our own CRD: one object per worker cluster, on the management cluster.
WORKER_CLUSTERS = Resource(
    "jobrelay.dev", "v1alpha1", "workerclusters", "WorkerCluster", namespaced=False
)
# SIG-Multicluster's ClusterProfile (KEP-4322): workers with --cluster-profiles.
CLUSTER_PROFILES = Resource(
    "multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", "ClusterProfile", namespaced=True
)
# Fleet-wide queues (RelayQueue): cluster-scoped, on the management cluster.
RELAY_QUEUES = Resource("jobrelay.dev", "v1alpha1", "relayqueues", "RelayQueue", namespaced=False)
# The aggregated API's registration (jobrelay run --api-register, outside a cluster).
SERVICES = Resource("", "v1", "services", "Service", namespaced=True)
ENDPOINT_SLICES = Resource(
    "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True
)
API_SERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", False)
# Registered with it: the managedBy defaulting webhook (relayapi/managedby_webhook_rules.py).
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration", False,
)  # fmt: skip
# Not a resource: /version, named so that request records and counts can show it.
VERSION = Resource("", "", "version", "Version", namespaced=False)


def resource_path(resource: Resource, namespace: str | None, name: str | None = None) -> str:
    """The URL path of ``resource``'s collection (in ``namespace``), or of ``name`` in it.

    ValueError for a scope mistake, before any request: a namespace for a
    cluster-scoped kind, or a namespaced object named without one.
    """
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    if resource.namespaced and namespace:
        prefix = f"{prefix}/namespaces/{quote(namespace, safe='')}"
    elif not resource.namespaced and namespace:
        raise ValueError(f"{resource.plural} are cluster-scoped; got namespace {namespace!r}")
    elif resource.namespaced and name is not None:
        raise ValueError(f"{resource.plural} are namespaced; a namespace is required")
    path = f"{prefix}/{resource.plural}"
    return path if name is None else f"{path}/{quote(name, safe='')}"
