"""Rendering charts/jobrelay-worker with helm, and what fleet/serviceaccount.py applies for
the same inputs: both fill in the chart's files/worker-access.yaml (the tests check they fill
it in alike)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobrelay.fleet import serviceaccount, workerclusters
from jobrelay.kinds.catalog import kinds_from_names
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import NAMESPACES, SECRETS
from jobrelay.localfleet.binaries.resolver import Tools, resolve_tools
from jobrelay.vocabulary.resource import Resource
from tests.chart_render import KUBE_VERSION

CHARTS = Path(__file__).parents[3] / "charts"
WORKER_CHART = CHARTS / "jobrelay-worker"
MANAGER_CHART = CHARTS / "jobrelay"
# The labels the chart adds to those `clusters add --create-service-account` writes.
RELEASE_LABELS = {"app.kubernetes.io/part-of", "app.kubernetes.io/instance", "helm.sh/chart"}
RESOURCES = {
    resource.kind: resource
    for resource in (
        NAMESPACES, SECRETS, serviceaccount.SERVICE_ACCOUNTS, serviceaccount.CLUSTER_ROLES,
        serviceaccount.CLUSTER_ROLE_BINDINGS, serviceaccount.ROLE_BINDINGS,
        serviceaccount.VALIDATING_POLICIES,
        serviceaccount.VALIDATING_POLICY_BINDINGS,
    )
}  # fmt: skip


def tools() -> Tools:
    """helm 3 and 4 as `jobrelay fleet build` left them (CI runs it first)."""
    found = resolve_tools(build=False)
    for path in (found.helm, found.helm4):
        assert path.is_file(), f"{path} is missing: run `jobrelay fleet build` first"
    return found


def helm(
    *args: str, binary: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` (helm 3 unless ``binary``), output captured. A render or lint is for
    the fleet's Kubernetes (Helm 3 assumes 1.20 without a cluster, older than the charts'
    kubeVersion)."""
    if args[:1] in (("template",), ("lint",)) and "--kube-version" not in args:
        args = (*args, "--kube-version", KUBE_VERSION)
    done = subprocess.run(
        [str(binary or tools().helm), *args], capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    if check:
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}{done.stdout}"
    return done


def values_file(values: Mapping[str, Any]) -> Path:
    handle = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)  # noqa: SIM115
    with handle:
        json.dump(dict(values), handle)
    return Path(handle.name)


def render(
    chart: Path,
    values: Mapping[str, Any],
    *,
    namespace: str = "jobrelay-system",
    release: str = "jobrelay-worker",
    show_only: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """`helm template` of ``chart`` with ``values``: the objects, in order."""
    path = values_file(values)
    try:
        args = ["template", release, str(chart), "-n", namespace, "-f", str(path)]
        for template in show_only:
            args += ["-s", template]
        text = helm(*args).stdout
    finally:
        path.unlink()
    return [doc for doc in yaml.safe_load_all(text) if doc]


@dataclass(frozen=True)
class Inputs:
    """What `clusters add --create-service-account` is given, read from chart values."""

    account: serviceaccount.WorkerAccount
    origin: str
    kinds: list[Resource]
    create_namespaces: bool

    @classmethod
    def of(cls, values: Mapping[str, Any], release_namespace: str) -> Inputs:
        origin = str(values["origin"])
        entries = values.get("kinds") or [{"name": "Job.v1.batch", "resource": "jobs"}]
        plurals = {entry["name"]: entry["resource"] for entry in entries if entry.get("resource")}
        names = [entry["name"] for entry in entries]
        kinds = [kind.ref for kind in kinds_from_names(names, plurals=plurals)]
        account = serviceaccount.WorkerAccount(
            values.get("namespaceOverride") or release_namespace,
            (values.get("serviceAccount") or {}).get("name") or serviceaccount.account_name(origin),
        )
        return cls(account, origin, kinds, bool(values.get("createNamespaces", True)))

    def generated(self, *, policy: bool = True, token: bool = True) -> list[dict[str, Any]]:
        """What `clusters add --create-service-account` applies (but the Namespace, which
        helm's --create-namespace makes), as the chart should render them."""
        rules = serviceaccount.worker_rules(self.kinds, create_namespaces=self.create_namespaces)
        made = (
            serviceaccount.admission_policy(self.account, self.origin, self.kinds)
            if policy
            else None
        )
        return [
            manifest
            for _, manifest in serviceaccount.manifests(self.account, rules, made)
            if manifest["kind"] != "Namespace" and (token or manifest["kind"] != "Secret")
        ]


def without_release_labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with the labels only the chart adds taken off (checked to be only those)."""
    copied = json.loads(json.dumps(obj))
    labels = copied["metadata"].get("labels") or {}
    for key in RELEASE_LABELS:
        labels.pop(key, None)
    return dict(copied)


async def mint_token(
    client: ApiClient, namespace: str, account: str, *, seconds: int = 3600
) -> str:
    """A token of ServiceAccount ``namespace/account`` from the TokenRequest API, as
    `kubectl create token` gets one."""
    token_requests = Resource(
        "", "v1", f"serviceaccounts/{account}/token", "TokenRequest", namespaced=True
    )
    answer = await client.create(
        token_requests,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": seconds}},
        namespace=namespace,
    )  # fmt: skip
    token: str = answer["status"]["token"]
    return token


def token_kubeconfig(admin_kubeconfig: Path, cluster: str, user: str, token: str) -> dict[str, Any]:
    """A kubeconfig with the server and CA (inline) of ``admin_kubeconfig``'s current cluster
    and only ``token`` as the user: what a worker admin hands the manager."""
    inlined = workerclusters.inline_kubeconfig(admin_kubeconfig)
    return serviceaccount.worker_kubeconfig(
        cluster, inlined["clusters"][0]["cluster"], token, serviceaccount.WorkerAccount(name=user)
    )
