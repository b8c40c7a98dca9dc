"""The JobSet controller as one more component of every local cluster.

Each cluster (manager and workers) runs upstream's JobSet controller
(``sigs.k8s.io/jobset``, the release pinned in ``binaries.versions.JOBSET_VERSION``)
next to kube-controller-manager, with its CRD, RBAC and webhook configurations
taken from that release's module (see ``binaries.jobset_manifests``).

**Identity.** The controller authenticates with a client certificate of the
fleet CA (user ``jobrelay:jobset-controller``) bound to upstream's own
ClusterRole (``jobset-manager-role``), so a missing permission shows as it
would in a real cluster.

**Webhooks are served for real.** The apiserver calls the controller at
``https://127.0.0.1:<jobset-webhook port>/<upstream path>`` through a ``url``
clientConfig whose caBundle is the fleet CA, and the controller serves them
with a certificate the fleet CA issued for 127.0.0.1. Its internal cert
management (``internalCertManagement.enable: false``) is off: that rotator
would write a Secret and patch the webhook configurations for an in-cluster
Service that does not exist here. So JobSets get upstream's defaulting
(success policy All, Indexed completion, ``restartPolicy: OnFailure``, DNS
hostnames with a headless Service) and validation (``spec.managedBy``
immutable, among others), and JobSet pods its pod webhooks. failurePolicy
stays ``Fail`` as upstream ships it: while a cluster's controller is down,
creating a JobSet there (or a JobSet's pod) is refused, as on a real cluster;
other pods never reach the pod webhooks (they select JobSet pods by label).
``up`` returns only after a dry-run JobSet went through both webhooks.

**spec.managedBy.** Upstream's reconciler returns early for any JobSet whose
``spec.managedBy`` is set to something other than
``jobset.sigs.k8s.io/jobset-controller`` (for MultiKueue; the same early
return is in the sources of v0.5.2, v0.6.0, v0.10.1 and v0.11.0), so on
the manager JobSets meant for jobrelay are left alone, while JobSets without
the field run there (hybrid mode), as Jobs do with the built-in Job controller.

**Footprint.** Leader election and the metrics endpoint are off; its health
probe and webhook listen on 127.0.0.1 ports chosen like every other port. The
controller itself is small (about 50 MB resident, under 0.1% of a core when
idle), but upstream has no option to narrow its caches: it caches every Job,
Service and Pod of its cluster. Each apiserver pays more: establishing the CRD
costs it about 0.9 s of CPU, and it holds some 100 MB more (see ``slim_crd``).
The fleet starts the CRD's installation as soon as the apiservers are ready,
alongside the other components, and the controller once the CRD is served.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml

from jobrelay.kinds.jobset import JOBSET_CONTROLLER, JobSetKind
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS
from jobrelay.localfleet import pki
from jobrelay.localfleet.cluster_files import ClusterFiles
from jobrelay.vocabulary.resource import Resource

COMPONENT = "jobset-controller"
PORT_NAMES = ("jobset-webhook", "jobset-health")
USER = "jobrelay:jobset-controller"
CONTROLLER_NAME = JOBSET_CONTROLLER
FIELD_MANAGER = "jobrelay-localfleet"
VERSION_ANNOTATION = "fleet.jobrelay.dev/jobset-crd"
ESTABLISHED_TIMEOUT = 30.0
WEBHOOK_CHECK_TIMEOUT = 30.0

JOBSETS = JobSetKind.ref
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
WEBHOOK_RESOURCES = {
    "MutatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    "ValidatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
}


class JobSetError(RuntimeError):
    """The JobSet manifests could not be installed, or its webhooks are not reachable."""


@dataclass(frozen=True)
class Manifests:
    """What ``binaries.jobset_manifests`` extracted from the JobSet module for its release."""

    version: str
    crd: dict[str, Any]
    cluster_role: dict[str, Any]
    webhook_configurations: list[dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> Manifests:
        try:
            data = json.loads(path.read_text())
            return cls(
                version=str(data["version"]),
                crd=data["crd"],
                cluster_role=data["clusterRole"],
                webhook_configurations=list(data["webhookConfigurations"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise JobSetError(
                f"{path} is not a JobSet manifests file ({error!r}): delete its directory and "
                "run `jobrelay fleet build`"
            ) from error


# --- files and command line -------------------------------------------------


def webhook_cert_dir(files: ClusterFiles) -> Path:
    # controller-runtime wants tls.crt and tls.key in one directory of their own.
    return files.pki / "jobset-webhook"


def config_path(files: ClusterFiles) -> Path:
    return files.root / "jobset-config.yaml"


def prepare(files: ClusterFiles, *, ca: pki.CertPair, ports: dict[str, int]) -> None:
    """Write the serving certificate and the controller's configuration file."""
    pki.issue(
        ca,
        webhook_cert_dir(files),
        "tls",
        common_name="jobset-webhook",
        server_hosts=("127.0.0.1", "localhost"),
    )
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "webhook": {
            "host": "127.0.0.1",
            "port": ports["jobset-webhook"],
            "certDir": str(webhook_cert_dir(files)),
        },
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
        # "0" turns the metrics server off: one port less, and no TokenReviews.
        "metrics": {"bindAddress": "0"},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        # Like kube-controller-manager here: never the bottleneck of a benchmark.
        "clientConnection": {"qps": 200, "burst": 400},
    }
    config_path(files).write_text(yaml.safe_dump(config, sort_keys=False))


def command(files: ClusterFiles, binary: Path) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={files.kubeconfig(COMPONENT)}",
        f"--config={config_path(files)}",
        # Its default (development logging at debug level) logs every reconcile.
        "--zap-log-level=info",
    ]


def health_url(ports: dict[str, int]) -> str:
    # readyz turns 200 once the webhook server listens with its certificate.
    return f"http://127.0.0.1:{ports['jobset-health']}/readyz"


# --- manifests on the apiserver ---------------------------------------------


def webhook_configurations(
    manifests: Manifests, *, ca_pem: bytes, port: int
) -> list[dict[str, Any]]:
    """Upstream's webhook configurations, calling 127.0.0.1:``port`` instead of a Service."""
    bundle = base64.b64encode(ca_pem).decode()
    configurations = copy.deepcopy(manifests.webhook_configurations)
    for configuration in configurations:
        configuration.setdefault("apiVersion", "admissionregistration.k8s.io/v1")
        for webhook in configuration.get("webhooks") or []:
            path = ((webhook.get("clientConfig") or {}).get("service") or {}).get("path")
            if not path:
                raise JobSetError(
                    f"webhook {webhook.get('name')} of {configuration['metadata']['name']} "
                    "names no service path to serve at 127.0.0.1"
                )
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
    return configurations


def cluster_role_binding(manifests: Manifests) -> dict[str, Any]:
    role = manifests.cluster_role["metadata"]["name"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role.removesuffix("-role") + "-rolebinding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }


async def install(client: ApiClient, manifests: Manifests, *, ca: Path, webhook_port: int) -> None:
    """CRD (until Established), RBAC, and webhook configurations pointing at ``webhook_port``.

    Run before the controller starts: it needs the CRD served, and a restarted
    fleet (say, moved to other ports) needs its webhook URLs updated.
    """
    await _ensure_crd(client, manifests)
    role = manifests.cluster_role
    await _apply(client, CLUSTER_ROLES, role)
    await _apply(client, CLUSTER_ROLE_BINDINGS, cluster_role_binding(manifests))
    ca_pem = await asyncio.to_thread(ca.read_bytes)
    for configuration in webhook_configurations(manifests, ca_pem=ca_pem, port=webhook_port):
        await _apply(client, WEBHOOK_RESOURCES[configuration["kind"]], configuration)


async def _apply(client: ApiClient, resource: Resource, obj: dict[str, Any]) -> None:
    await client.patch(
        resource,
        obj["metadata"]["name"],
        {"apiVersion": resource.api_version, "kind": resource.kind, **obj},
        patch_type=PatchType.APPLY,
        field_manager=FIELD_MANAGER,
        force=True,
    )


async def _ensure_crd(client: ApiClient, manifests: Manifests) -> None:
    """Create or update the CRD unless it is already this release's; wait until it is served.

    Plain JSON create/replace, not server-side apply: the CRD is 600 KB, and a
    restarted fleet, whose etcd already holds it, only reads it back.
    """
    crd = slim_crd(manifests.crd)
    name = crd["metadata"]["name"]
    # Which release, and which rendering of it, the stored CRD is.
    digest = hashlib.sha256(json.dumps(crd, sort_keys=True).encode()).hexdigest()[:12]
    stamp = f"{manifests.version}/{digest}"
    crd["metadata"].setdefault("annotations", {})[VERSION_ANNOTATION] = stamp
    try:
        existing: dict[str, Any] | None = await client.get(CRDS, name)
    except ApiError as error:
        if not error.is_not_found:
            raise
        existing = None
    if existing is None:
        existing = await client.create(CRDS, crd, field_manager=FIELD_MANAGER)
    elif (existing["metadata"].get("annotations") or {}).get(VERSION_ANNOTATION) != stamp:
        crd["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        existing = await client.replace(CRDS, crd, field_manager=FIELD_MANAGER)
    deadline = time.monotonic() + ESTABLISHED_TIMEOUT
    while not _established(existing):
        if time.monotonic() > deadline:
            raise JobSetError(
                f"{client.cluster}: CRD {name} was not established within "
                f"{ESTABLISHED_TIMEOUT:.0f}s"
            )
        await asyncio.sleep(0.1)
        existing = await client.get(CRDS, name)


def slim_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD without the schema's descriptions: the same API and validation.

    Descriptions are four fifths of its 360 KB of JSON, and every apiserver
    keeps several copies (the object, its OpenAPI v2 and v3 documents, their
    encodings): without them an apiserver's heap is some 50 MB smaller (30 MB
    of resident memory). Only ``kubectl explain`` says less.
    """
    slim = copy.deepcopy(crd)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            # Only a schema's own text: a property *named* description is a dict.
            if isinstance(node.get("description"), str):
                del node["description"]
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    for version in slim["spec"].get("versions") or []:
        strip((version.get("schema") or {}).get("openAPIV3Schema"))
    return slim


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


# --- the end-to-end check ---------------------------------------------------


def probe_jobset() -> dict[str, Any]:
    """A minimal JobSet, as a user would write it, for the dry-run webhook check."""
    return {
        "apiVersion": JOBSETS.api_version,
        "kind": JOBSETS.kind,
        # A generated name never collides with a user's JobSet (which would fail the check).
        "metadata": {"generateName": "jobrelay-webhook-check-"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "check",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {"containers": [{"name": "check", "image": "busybox"}]}
                            }
                        }
                    },
                }
            ]
        },
    }


async def check_webhooks(
    server: str, *, ca: Path, client_cert: pki.CertPair, timeout: float = WEBHOOK_CHECK_TIMEOUT
) -> None:
    """Dry-run a JobSet through ``server``: fine once both webhooks were called.

    Creating with ``dryRun=All`` runs admission (so the apiserver must reach
    the controller at its URL, trusting its certificate) but stores nothing.
    The mutating webhook is known to have run by its defaulting of
    ``spec.network``. Retries until ``timeout``, then raises JobSetError.
    """
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(client_cert.cert), str(client_cert.key))
    url = f"{server}/apis/{JOBSETS.group}/{JOBSETS.version}/namespaces/default/{JOBSETS.plural}"
    deadline = time.monotonic() + timeout
    detail = ""
    async with httpx2.AsyncClient(verify=context, timeout=10.0) as http:
        while True:
            try:
                response = await http.post(url, params={"dryRun": "All"}, json=probe_jobset())
            except httpx2.HTTPError as error:
                detail = f"{type(error).__name__}: {error}"
            else:
                if response.status_code == 201:
                    network = response.json().get("spec", {}).get("network") or {}
                    if network.get("enableDNSHostnames") is True:
                        return
                    detail = "the dry-run JobSet came back without the webhook's defaults"
                else:
                    detail = f"HTTP {response.status_code}: {response.text[:300].strip()}"
            if time.monotonic() > deadline:
                raise JobSetError(
                    f"the apiserver at {server} cannot use the JobSet webhooks ({detail})"
                )
            await asyncio.sleep(0.2)
