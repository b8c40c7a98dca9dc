"""Least-privilege worker credentials: a ServiceAccount made on the worker for jobrelay.

`jobrelay clusters add NAME --kubeconfig ADMIN.kubeconfig --create-service-account`
uses the admin's kubeconfig once, to create on the worker a namespace, a
ServiceAccount, a ClusterRole with exactly the rules below, a binding and a
token Secret; the worker is then registered with that token (and the admin's
server and CA), never with the admin's credentials.

What jobrelay does on a worker, and so all its roles allow. The objects are written once,
in charts/jobrelay-worker/files/worker-access.yaml: that chart renders them, and this
module applies them (``jobrelay.manifests.worker_access`` fills them in). Cluster-wide (the
ClusterRole ``jobrelay-worker-<origin>`` and its ClusterRoleBinding):

* each kind's mirrors: list and watch (the pool's informers), get (the reconciler
  reads one back), create, patch (suspend, spec changes) and delete (garbage
  collection, `clusters remove`); the status subresource read;
* the objects a kind's operator makes from a mirror (owner hops: a RayJob's RayCluster,
  an MPIJob's launcher Job), listed and watched;
* Events read, to tell what happened to a mirror;
* Nodes and Pods listed and watched: the worker's capacity that placement weighs
  (allocatable per node, the requests of the pods bound to each, pending pods of its
  mirrors). Every pod counts, so every pod is listed (docs/security.md says what that
  exposes);
* PersistentVolumeClaims listed and watched (never read one by one, never written):
  a workload that mounts a claim is placed only where that claim is Bound;
* namespaces listed and watched (and read one by one, when a create meets one made
  meanwhile): a mirror goes only into a namespace labelled `jobrelay.dev/origin:
  <this manager's origin>`; created (with that label) only when jobrelay creates a
  workload's namespace on a worker that lacks it (`jobrelay run` without
  --no-create-namespaces);
* RoleBindings created, and the one ClusterRole ``jobrelay-worker-<origin>-namespaced``
  bound (``bind`` with resourceNames; never ``escalate``).

Only in namespaces opened to the origin, through a RoleBinding of
``jobrelay-worker-<origin>-namespaced`` there (the worker chart makes it for the namespaces
it opens; the relay makes it before it copies anything into a namespace it created or
found opened): the ConfigMaps, Secrets and ServiceAccounts workloads reference, copied
beside their mirrors (docs/dependencies.md), and a pod read one by one with its logs. No
Secret is readable anywhere else.

The health probe (GET /version) and API discovery are open to every
authenticated user and need no rule.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.fleet.workerclusters import RegistryError
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.resources import NAMESPACES, SECRETS
from jobrelay.manifests import worker_access
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource

DEFAULT_NAMESPACE = "jobrelay-system"
DEFAULT_ACCOUNT = "jobrelay-worker"
TOKEN_TIMEOUT = 60.0

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
    namespaced=False,
)  # fmt: skip
ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
    namespaced=False,
)  # fmt: skip

VALIDATING_POLICIES = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy", namespaced=False,
)  # fmt: skip
VALIDATING_POLICY_BINDINGS = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding", namespaced=False,
)  # fmt: skip


def worker_rules(kinds: Iterable[Resource], *, create_namespaces: bool) -> list[dict[str, Any]]:
    """The ClusterRole rules jobrelay needs on a worker that runs mirrors of ``kinds``."""
    return worker_access.access_rules(kinds, create_namespaces=create_namespaces)


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def account_name(origin: str) -> str:
    """``jobrelay-worker-<origin>``: one credential per manager on a worker. An origin that
    cannot be part of a name (or is long) is shortened and made unique by its hash."""
    if _DNS_LABEL.fullmatch(origin) and len(origin) <= 40:
        return f"{DEFAULT_ACCOUNT}-{origin}"
    digest = hashlib.sha256(origin.encode()).hexdigest()[:10]
    cleaned = re.sub(r"[^a-z0-9-]+", "-", origin.lower())[:28].strip("-")
    return f"{DEFAULT_ACCOUNT}-{cleaned}-{digest}" if cleaned else f"{DEFAULT_ACCOUNT}-{digest}"


def admission_policy(
    account: WorkerAccount, origin: str, kinds: Iterable[Resource]
) -> list[tuple[Resource, dict[str, Any]]]:
    """A ValidatingAdmissionPolicy and its binding for the worker: what the account
    writes (each kind's mirrors, namespaces) goes only into namespaces labelled with
    ``origin``, never into ``kube-*`` nor the account's own namespace."""
    policy, binding = worker_access.policy_objects(
        account.name, account.namespace, account.username, origin, kinds
    )
    return [(VALIDATING_POLICIES, policy), (VALIDATING_POLICY_BINDINGS, binding)]


@dataclass(frozen=True)
class WorkerAccount:
    """Where jobrelay's identity lives on a worker; the ClusterRole and its bindings share
    the ServiceAccount's name (the ClusterRole of opened namespaces adds ``-namespaced``)."""

    namespace: str = DEFAULT_NAMESPACE
    name: str = DEFAULT_ACCOUNT

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def token_secret(self) -> str:
        return worker_access.token_secret_name(self.name)

    @property
    def namespace_role(self) -> str:
        """The ClusterRole bound in each namespace opened to it."""
        return worker_access.namespace_role_name(self.name)


def manifests(
    account: WorkerAccount,
    rules: list[dict[str, Any]],
    policy: list[tuple[Resource, dict[str, Any]]] | None = None,
) -> list[tuple[Resource, dict[str, Any]]]:
    """The objects to apply on the worker, in order (the Secret names the ServiceAccount,
    which must exist first for the token controller to fill it; the admission policy
    comes before anything the account could write with)."""
    # Without the admission policy, nothing would keep its RoleBindings in opened
    # namespaces: a worker admin binds each one instead.
    made = worker_access.account_objects(
        account.name, account.namespace, rules, bind_namespaces=policy is not None
    )
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": account.namespace}}
    return [
        *(policy or []),
        (NAMESPACES, namespace),
        (SERVICE_ACCOUNTS, made["serviceAccount"]),
        (CLUSTER_ROLES, made["namespaceRole"]),
        (CLUSTER_ROLES, made["clusterRole"]),
        (CLUSTER_ROLE_BINDINGS, made["clusterRoleBinding"]),
        (SECRETS, made["tokenSecret"]),
    ]


def describe(resource: Resource, manifest: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` for what was applied."""
    metadata = manifest["metadata"]
    namespace = metadata.get("namespace")
    return f"{resource.kind} {namespace}/{metadata['name']}" if namespace else (
        f"{resource.kind} {metadata['name']}"
    )  # fmt: skip


def secret_token(secret: Mapping[str, Any], account: WorkerAccount) -> str | None:
    """The bearer token the token controller wrote into the Secret, once it has (and only
    if it is the token of ``account``: the Secret could name another ServiceAccount)."""
    if Meta(secret).annotation("kubernetes.io/service-account.name") != account.name:
        return None
    encoded = (secret.get("data") or {}).get("token")
    if not encoded:
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def worker_kubeconfig(
    cluster_name: str, admin_cluster: Mapping[str, Any], token: str, account: WorkerAccount
) -> dict[str, Any]:
    """A kubeconfig for the worker with the admin's server and CA (inline) and the token.

    Only the fields that say where the apiserver is and how to trust it are kept
    from the admin's cluster entry; nothing of the admin's user is.
    """
    kept = ("server", "certificate-authority-data", "tls-server-name")
    cluster = {key: admin_cluster[key] for key in kept if key in admin_cluster}
    if "server" not in cluster:
        raise RegistryError(f"the admin kubeconfig names no server for cluster {cluster_name}")
    user = f"{account.name}@{cluster_name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
    }


@dataclass(frozen=True)
class CreatedAccount:
    """What ``create_service_account`` applied on the worker, and the kubeconfig to register."""

    applied: list[str]
    kubeconfig: dict[str, Any]


async def create_service_account(
    admin: ApiClient,
    cluster_name: str,
    admin_cluster: Mapping[str, Any],
    account: WorkerAccount,
    rules: list[dict[str, Any]],
    *,
    policy: list[tuple[Resource, dict[str, Any]]] | None = None,
    timeout: float = TOKEN_TIMEOUT,
) -> CreatedAccount:
    """Apply the account's objects on the worker (server-side apply: idempotent, and a
    changed rule set replaces the old one), wait for its token, and build its kubeconfig."""
    applied = []
    for resource, manifest in manifests(account, rules, policy):
        await admin.patch(
            resource, manifest["metadata"]["name"], manifest,
            namespace=manifest["metadata"].get("namespace"),
            patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
        )  # fmt: skip
        applied.append(describe(resource, manifest))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        secret = await admin.get(SECRETS, account.token_secret, namespace=account.namespace)
        token = secret_token(secret, account)
        if token is not None:
            return CreatedAccount(
                applied, worker_kubeconfig(cluster_name, admin_cluster, token, account)
            )
        if loop.time() > deadline:
            raise RegistryError(
                f"the worker's token controller did not fill Secret {account.namespace}/"
                f"{account.token_secret} within {timeout:.0f}s: is kube-controller-manager "
                "running there with --service-account-private-key-file?"
            )
        await asyncio.sleep(0.2)  # polling a Secret for a field another controller writes
