"""Worker clusters as the management cluster knows them.

A worker is a cluster-scoped ``WorkerCluster`` object (jobrelay.dev/v1alpha1)
whose spec names a Secret, in the controller's namespace, holding a kubeconfig
for the worker. Workers need nothing installed: only credentials that may
manage Jobs (and create namespaces, unless that is turned off).
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from jobrelay.kinds.naming import FIELD_MANAGER
from jobrelay.kube.api import (
    CRDS,
    NAMESPACES,
    SECRETS,
    WORKER_CLUSTERS,
    ApiClient,
    ApiError,
    PatchType,
)

DEFAULT_NAMESPACE = "jobrelay-system"
CRD_MANIFEST = Path(__file__).with_name("workercluster-crd.yaml")
SECRET_KEY = "kubeconfig"
SECRET_PREFIX = "worker-"
_QUOTED = re.compile(r"'[^'\s]{3,}'")


class RegistryError(RuntimeError):
    """A worker cannot be registered or used; the message says why."""


def secret_name(worker: str) -> str:
    return f"{SECRET_PREFIX}{worker}-kubeconfig"


def crd_manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_MANIFEST.read_text())
    return loaded


async def install_crd(client: ApiClient, *, timeout: float = 30.0) -> None:
    """Apply the WorkerCluster CRD (server-side apply) and wait until it is served."""
    manifest = crd_manifest()
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


async def ensure_namespace(client: ApiClient, namespace: str) -> None:
    """Create ``namespace`` unless it exists. Read first: the controller may get
    namespaces but not create them (deploy/ creates its namespace), and RBAC refuses
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
    uid = (namespace.get("metadata") or {}).get("uid")
    if not isinstance(uid, str) or not uid:
        raise RegistryError("namespace kube-system has no UID: name the origin with --origin")
    return uid


def inline_kubeconfig(path: Path, context: str | None = None) -> dict[str, Any]:
    """The kubeconfig at ``path``, reduced to one context with every file inlined.

    A Secret carries no files, so certificate and key paths become ``*-data``.
    """
    try:
        config: dict[str, Any] = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise RegistryError(f"cannot read kubeconfig {path}: {error}") from error
    if not isinstance(config, dict):
        raise RegistryError(f"{path} is not a kubeconfig")
    context_name = context or config.get("current-context")
    contexts = {entry["name"]: entry["context"] for entry in config.get("contexts") or []}
    if context_name not in contexts:
        raise RegistryError(
            f"kubeconfig {path} has no context {context_name!r} (has: {', '.join(contexts)})"
        )
    chosen = contexts[context_name]
    cluster = _by_name(config.get("clusters"), chosen["cluster"], "cluster", path)
    user = _by_name(config.get("users"), chosen["user"], "user", path)
    base = path.parent
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": chosen["cluster"], "cluster": _inline(cluster, base)}],
        "users": [{"name": chosen["user"], "user": _inline(user, base)}],
        "contexts": [{"name": context_name, "context": chosen}],
        "current-context": context_name,
    }


def _by_name(entries: Any, name: str, kind: str, path: Path) -> dict[str, Any]:
    for entry in entries or []:
        if entry.get("name") == name:
            value: dict[str, Any] = entry.get(kind) or {}
            return value
    raise RegistryError(f"kubeconfig {path} has no {kind} {name!r}")


def _inline(section: Mapping[str, Any], base: Path) -> dict[str, Any]:
    result = dict(section)
    for field in ("certificate-authority", "client-certificate", "client-key"):
        if field in result:
            file = Path(result.pop(field)).expanduser()
            result[f"{field}-data"] = base64.b64encode((base / file).read_bytes()).decode()
    if "tokenFile" in result:
        result["token"] = (base / Path(result.pop("tokenFile"))).read_text().strip()
    return result


async def register(
    client: ApiClient,
    name: str,
    kubeconfig: Mapping[str, Any],
    *,
    context: str | None = None,
    labels: Mapping[str, str] | None = None,
    namespace: str = DEFAULT_NAMESPACE,
) -> None:
    """Create or update the worker's kubeconfig Secret and its WorkerCluster."""
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
            raise RegistryError(
                "the WorkerCluster CRD is not installed: run `jobrelay install`"
            ) from error
        raise


async def read_kubeconfig(
    client: ApiClient, worker: Mapping[str, Any], namespace: str
) -> dict[str, Any]:
    """The kubeconfig a WorkerCluster's Secret holds."""
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
    data = (secret.get("data") or {}).get(key)
    if not data:
        raise RegistryError(f"Secret {namespace}/{name} has no key {key!r}")
    try:
        loaded = yaml.safe_load(base64.b64decode(data))
    except (ValueError, yaml.YAMLError) as error:
        raise RegistryError(
            f"Secret {namespace}/{name} key {key!r} is not a kubeconfig: {_yaml_problem(error)}"
        ) from error
    if not isinstance(loaded, dict):
        raise RegistryError(f"Secret {namespace}/{name} key {key!r} is not a kubeconfig")
    return loaded


def _yaml_problem(error: Exception) -> str:
    """What is wrong and where, without the lines of the document: a kubeconfig's lines
    hold credentials, which must not reach a status or a log."""
    if not isinstance(error, yaml.MarkedYAMLError):
        return type(error).__name__ if isinstance(error, yaml.YAMLError) else str(error)
    mark = error.problem_mark or error.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = "; ".join(part for part in (error.context, error.problem) if part)
    # A problem may quote the document (an alias, a tag): keep only short quotes, like ':'.
    what = _QUOTED.sub("'...'", what)
    return f"invalid YAML{where}: {what or 'cannot be parsed'}"
