"""Worker clusters as the management cluster knows them.

A worker is a cluster-scoped ``WorkerCluster`` object (jobrelay.dev/v1alpha1)
whose spec names a Secret, in the controller's namespace, holding a kubeconfig
for the worker. Workers need nothing installed: only credentials that may
manage Jobs (and create namespaces, unless that is turned off).
"""

from __future__ import annotations

import asyncio
import base64
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from jobrelay.fleet import credentials
from jobrelay.kube import redact
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS, NAMESPACES, RELAY_QUEUES, SECRETS, WORKER_CLUSTERS
from jobrelay.manifests import chart_sources
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource

DEFAULT_NAMESPACE = "jobrelay-system"
SECRET_KEY = "kubeconfig"
SECRET_PREFIX = "worker-"


class RegistryError(RuntimeError):
    """A worker cannot be registered or used; the message says why."""


def secret_name(worker: str) -> str:
    return f"{SECRET_PREFIX}{worker}-kubeconfig"


# Where an admin finds jobrelay's CRDs without the chart: their one copy, which the chart's
# templates/crds.yaml renders and the package ships.
CRD_FILES = "charts/jobrelay/files/crds/"


def crd_manifest() -> dict[str, Any]:
    """The WorkerCluster CRD: the chart's ``files/crds/`` file (one copy, shipped in the
    package)."""
    return chart_sources.chart_document(chart_sources.WORKER_CLUSTER_CRD)


def missing_crd(resource: Resource) -> str:
    """One line: the manager serves no ``resource``, and how an admin installs jobrelay's
    CRDs (the CLI never writes them: whoever owns them, the chart or GitOps, does)."""
    return (
        f"the management cluster has no {resource.kind} CRD ({resource.plural}."
        f"{resource.group}): install jobrelay's CRDs with its chart (crds.install, the "
        f"default) or `kubectl apply --server-side -f {CRD_FILES}`"
    )


async def check_crds(client: ApiClient) -> None:
    """RegistryError, in one line, unless the manager serves WorkerClusters and RelayQueues
    (discovery: reading the CRDs themselves needs no right)."""
    for resource in (WORKER_CLUSTERS, RELAY_QUEUES):
        if not await crd_served(client, resource):
            raise RegistryError(missing_crd(resource))


async def install_crd(
    client: ApiClient, *, timeout: float = 30.0, manifest: dict[str, Any] | None = None
) -> None:
    """Apply a CRD (the WorkerCluster's by default; server-side apply) and wait until it
    is served. For an admin's tools only (the local fleet, `jobrelay run --install-crds`,
    tests): the CLI's verbs never write CRDs."""
    manifest = manifest or crd_manifest()
    name = manifest["metadata"]["name"]
    await client.patch(
        CRDS, name, manifest, patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True
    )
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        crd = await client.get(CRDS, name)
        conditions = crd.get("status", {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise RegistryError(f"CRD {name} was not established within {timeout:.0f}s")
        await asyncio.sleep(0.1)


async def crd_served(client: ApiClient, resource: Resource = WORKER_CLUSTERS) -> bool:
    """Whether the manager serves ``resource`` (WorkerClusters by default; discovery: no
    read of the CRD needed)."""
    try:
        served = await client.discover(resource.group, resource.version)
    except ApiError as error:
        if error.is_not_found:
            return False
        raise
    return any(r.get("name") == resource.plural for r in served)


async def ensure_namespace(client: ApiClient, namespace: str) -> None:
    """Create ``namespace`` unless it exists. Read first: the controller may get
    namespaces but not create them (helm creates its namespace), and RBAC refuses
    a create before the apiserver could answer AlreadyExists."""
    try:
        await client.get(NAMESPACES, namespace)
        return
    except ApiError as error:
        if not (error.is_not_found or error.code == 403):  # 403: may create but not read
            raise
    try:
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    except ApiError as error:
        if not error.is_already_exists:
            raise


async def default_origin(client: ApiClient) -> str:
    """The management cluster's identity when --origin is not given: the UID of its
    kube-system namespace, which no other cluster shares and no restart changes."""
    try:
        namespace = await client.get(NAMESPACES, "kube-system")
    except ApiError as error:
        raise RegistryError(
            f"cannot read namespace kube-system to identify this management cluster ({error}): "
            "grant `get` on it, or name the origin with --origin"
        ) from error
    uid = Meta(namespace).uid
    if not uid:
        raise RegistryError("namespace kube-system has no UID: name the origin with --origin")
    return uid


def inline_kubeconfig(
    path: Path, context: str | None = None, *, allow_exec: bool = False
) -> dict[str, Any]:
    """The kubeconfig at ``path``, reduced to one context with every file inlined.

    A Secret carries no files, so certificate, key and CA paths become
    ``*-data``. Everything the controller would refuse is refused here first
    (:func:`credentials.check_kubeconfig`), ``tokenFile`` included: its token
    rotates, and an inlined copy would go stale. The result is checked again.
    """
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        problem = redact.library_problem(error)
        raise RegistryError(f"cannot read kubeconfig {path}: {problem}") from None
    too_deep = credentials.nesting_problem(text.encode())
    if too_deep:
        raise RegistryError(f"kubeconfig {path}: {too_deep}")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise RegistryError(f"kubeconfig {path}: {redact.yaml_problem(error)}") from None
    check = functools.partial(
        credentials.check_kubeconfig, allow_exec=allow_exec, exec_flag=credentials.ADD_EXEC_FLAG
    )
    check(config, context=context, allow_inlinable_files=True)
    context_name = str(context or config["current-context"])
    chosen = next(e["context"] for e in config["contexts"] if e["name"] == context_name)
    cluster = _by_name(config["clusters"], chosen["cluster"], "cluster")
    user_name = chosen.get("user")
    base = path.parent
    inlined: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": chosen["cluster"], "cluster": _inline(cluster, base)}],
        "contexts": [{"name": context_name, "context": dict(chosen)}],
        "current-context": context_name,
    }
    if user_name:
        user = _by_name(config["users"], user_name, "user")
        inlined["users"] = [{"name": user_name, "user": _inline(user, base)}]
    check(inlined)
    return inlined


def _by_name(entries: Any, name: str, kind: str) -> dict[str, Any]:
    # check_kubeconfig has made sure that the entry exists and is a mapping.
    found: dict[str, Any] = next(e.get(kind) or {} for e in entries if e["name"] == name)
    return found


def _inline(section: Mapping[str, Any], base: Path) -> dict[str, Any]:
    result = dict(section)
    for field in credentials.INLINABLE_FILE_FIELDS:
        if field in result:
            file = base / Path(result.pop(field)).expanduser()
            try:
                content = file.read_bytes()
            except OSError as error:
                raise RegistryError(
                    f"cannot inline {field} {file}: {redact.library_problem(error)}"
                ) from None
            result[f"{field}-data"] = base64.b64encode(content).decode()
    return result


async def register(
    client: ApiClient,
    name: str,
    kubeconfig: Mapping[str, Any],
    *,
    context: str | None = None,
    labels: Mapping[str, str] | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    autoscaling: Mapping[str, Any] | None = None,
) -> None:
    """Create or update the worker's kubeconfig Secret and its WorkerCluster (with
    ``spec.autoscaling`` when given: the worker grows through ProvisioningRequests)."""
    await ensure_namespace(client, namespace)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(name),
            "namespace": namespace,
            "labels": {"jobrelay.dev/worker": name},
        },
        "type": "Opaque",
        "stringData": {SECRET_KEY: yaml.safe_dump(dict(kubeconfig))},
    }
    await client.patch(
        SECRETS, secret_name(name), secret, namespace=namespace,
        patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip
    spec: dict[str, Any] = {"kubeconfigSecretRef": {"name": secret_name(name), "key": SECRET_KEY}}
    if context:
        spec["context"] = context
    if autoscaling:
        spec["autoscaling"] = dict(autoscaling)
    worker = {
        "apiVersion": WORKER_CLUSTERS.api_version,
        "kind": WORKER_CLUSTERS.kind,
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }
    await client.patch(
        WORKER_CLUSTERS,
        name,
        worker,
        patch_type=PatchType.APPLY,
        field_manager=FIELD_MANAGER,
        force=True,
    )


async def unregister(client: ApiClient, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> bool:
    """Delete the WorkerCluster and its Secret; False when there was no such worker."""
    found = False
    for resource, object_name, ns in (
        (WORKER_CLUSTERS, name, None),
        (SECRETS, secret_name(name), namespace),
    ):
        try:
            await client.delete(resource, object_name, namespace=ns)
            found = found or resource is WORKER_CLUSTERS
        except ApiError as error:
            if not error.is_not_found:
                raise
    return found


async def list_workers(client: ApiClient) -> list[dict[str, Any]]:
    try:
        return (await client.list(WORKER_CLUSTERS)).items
    except ApiError as error:
        if error.is_not_found:
            raise RegistryError(missing_crd(WORKER_CLUSTERS)) from error
        raise


async def read_kubeconfig(
    client: ApiClient, worker: Mapping[str, Any], namespace: str, *, allow_exec: bool = False
) -> dict[str, Any]:
    """The kubeconfig a WorkerCluster's Secret holds, once :func:`credentials.check_kubeconfig`
    accepts it (for the WorkerCluster's context); else KubeconfigRefused."""
    ref = worker.get("spec", {}).get("kubeconfigSecretRef") or {}
    name, key = str(ref.get("name") or ""), str(ref.get("key") or SECRET_KEY)
    if not name:
        raise RegistryError(
            f"WorkerCluster {worker.get('metadata', {}).get('name')} names no Secret"
        )
    try:
        secret = await client.get(SECRETS, name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            raise RegistryError(f"Secret {namespace}/{name} is missing") from error
        raise
    where = f"Secret {namespace}/{name} key {key!r}"
    data = (secret.get("data") or {}).get(key)
    if data is None:
        raise RegistryError(f"Secret {namespace}/{name} has no key {key!r}")
    kubeconfig = credentials.decode_kubeconfig(data, where)
    context = (worker.get("spec") or {}).get("context") or None
    try:
        credentials.check_kubeconfig(
            kubeconfig, allow_exec=allow_exec, context=str(context) if context else None
        )
    except credentials.KubeconfigRefused as refused:
        raise credentials.KubeconfigRefused(f"{where}: {refused.where}", refused.problem) from None
    return kubeconfig
