"""The chart as helm renders it: `helm lint` with Helm 3 and Helm 4, the same objects from
both, and every object of three value sets accepted by a server-side dry run (the v1.35
schemas, admission included) on the local fleet's manager, with the real CRDs of the
Prometheus operator and cert-manager installed for their kinds."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES
from jobrelay.vocabulary.resource import Resource
from jobrelay.web.tls import certificate_authority
from tests.chart_render import (
    CHART,
    KUBE_VERSION,
    chart_tools,
    helm_template_text,
    objects,
    render,
)
from tests.conftest import FleetHandle
from tests.kubetools import eventually

pytestmark = pytest.mark.integration

FIELD_MANAGER = "jobrelay-chart-test"
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                "CustomResourceDefinition", namespaced=False)  # fmt: skip

# The CA of a Secret an operator made (source secret).
GIVEN_CA = certificate_authority("operators-ca", datetime.timedelta(days=30))[0]
# (release, namespace, values): the defaults; everything on; a Secret's certificate, one
# replica and every name changed.
VALUE_SETS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "defaults": ("jobrelay", "jobrelay-system", {}),
    "everything-on": (
        "relay",
        "jobrelay-system",
        {
            "monitoring": {
                "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
                "podMonitor": {"enabled": True},
                "prometheusRule": {"enabled": True},
                "grafanaDashboard": {"enabled": True},
            },
            "networkPolicy": {
                "enabled": True,
                "egress": {"apiserverCIDRs": ["10.0.0.1/32"], "workerCIDRs": ["192.168.0.0/16"]},
                "ingress": {"metricsFrom": [{"namespaceSelector": {}}]},
            },
            "api": {
                "certificate": {
                    "source": "certManager",
                    "issuerRef": {"name": "jobrelay-ca", "kind": "Issuer"},
                }
            },
            "kinds": [
                {"name": "Job.v1.batch"},
                {"name": "JobSet.v1alpha2.jobset.x-k8s.io"},
                {
                    "name": "RayJob.v1.ray.io",
                    "resource": "rayjobs",
                    "managedBy": "kueue.x-k8s.io/multikueue",
                },
            ],
        },
    ),
    "secret-one-replica-renamed": (
        "ops",
        "batch-relay",
        {
            "replicaCount": 1,
            "fullnameOverride": "dispatcher",
            "serviceAccount": {"name": "relay-sa"},
            "api": {
                "certificate": {
                    "source": "secret",
                    "secretName": "relay-tls",
                    "caBundle": GIVEN_CA.decode(),
                }
            },
        },
    ),
}
# Each certificate source, the rest default: what must render the same twice.
SOURCES: dict[str, dict[str, Any]] = {
    "selfSigned": {},
    "secret-pem": {"api": {"certificate": {"source": "secret", "secretName": "relay-tls",
                                           "caBundle": GIVEN_CA.decode()}}},
    "secret-base64": {"api": {"certificate": {
        "source": "secret", "secretName": "relay-tls",
        "caBundle": base64.b64encode(GIVEN_CA).decode()}}},
    "certManager": {"api": {"certificate": {"source": "certManager"}}},
    "certManager-issuer": {"api": {"certificate": {
        "source": "certManager", "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}},
}  # fmt: skip


def test_helm_3_and_helm_4_lint_the_chart_with_every_value_set(tmp_path: Path) -> None:
    tools = chart_tools()
    for name, (_release, namespace, values) in VALUE_SETS.items():
        values_file = tmp_path / f"{name}.json"
        values_file.write_text(json.dumps(values))
        for helm in (tools.helm, tools.helm4):
            result = subprocess.run(
                [str(helm), "lint", "--strict", str(CHART), "--namespace", namespace,
                 "--kube-version", KUBE_VERSION,
                 "--values", str(values_file)],
                capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
            assert result.returncode == 0, f"{helm} lint ({name}):\n{result.stdout}{result.stderr}"
            assert "[WARNING]" not in result.stdout, f"{helm} lint ({name}):\n{result.stdout}"


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_helm_3_and_helm_4_render_the_same_objects(value_set: str) -> None:
    release, namespace, values = VALUE_SETS[value_set]
    tools = chart_tools()
    helm3 = helm_template_text(tools.helm, values, release=release, namespace=namespace)
    helm4 = helm_template_text(tools.helm4, values, release=release, namespace=namespace)
    # In the order of kinds each installs in: Helm 4 knows MutatingWebhookConfiguration's
    # place, Helm 3 puts it among the kinds it does not know.
    assert sorted(objects(helm3), key=_kind_and_name) == sorted(objects(helm4), key=_kind_and_name)


@pytest.mark.parametrize("values", [*VALUE_SETS.values(),
                                    *(("jobrelay", "jobrelay-system", v) for v in SOURCES.values())],
                         ids=[*VALUE_SETS, *SOURCES])  # fmt: skip
def test_two_renders_of_the_same_values_are_byte_identical(
    values: tuple[str, str, dict[str, Any]],
) -> None:
    """What Argo CD and Flux run (``helm template``) settles: nothing is generated or
    looked up at render time, with Helm 3 and Helm 4 alike."""
    release, namespace, chosen = values
    tools = chart_tools()
    for helm in (tools.helm, tools.helm4):
        first = helm_template_text(helm, chosen, release=release, namespace=namespace)
        assert helm_template_text(helm, chosen, release=release, namespace=namespace) == first
    # NOTES.txt may look up (it prints the recorded origin): Helm shows it after an
    # install, and no render of the manifests contains it.
    assert not [path.name for path in (CHART / "templates").iterdir()
                if path.name != "NOTES.txt" and "lookup" in path.read_text()]  # fmt: skip


def test_each_certificate_source_renders_its_ca_bundle() -> None:
    """selfSigned: no Secret and no caBundle rendered (the controller writes the field);
    secret: the given CA, PEM or base64, in the APIService and every webhook;
    certManager: cert-manager's injector annotation."""
    helm = chart_tools().helm
    for source, values in SOURCES.items():
        rendered = render(helm, values)
        api_service = next(d for d in rendered if d["kind"] == "APIService")
        webhooks = next(d for d in rendered if d["kind"] == "MutatingWebhookConfiguration")
        bundles = {api_service["spec"].get("caBundle"),
                   *(w["clientConfig"].get("caBundle") for w in webhooks["webhooks"])}  # fmt: skip
        annotations = api_service["metadata"].get("annotations") or {}
        if source.startswith("secret"):
            assert bundles == {base64.b64encode(GIVEN_CA).decode()}, source
        else:
            assert bundles == {None}, source
        assert ("cert-manager.io/inject-ca-from" in annotations) == source.startswith("cert")
        assert not [d for d in rendered if d["kind"] == "Secret"], source
        (container,) = next(d for d in rendered if d["kind"] == "Deployment")["spec"][
            "template"]["spec"]["containers"]  # fmt: skip
        if source == "selfSigned":
            assert "--api-cert-secret=jobrelay-api-tls" in container["args"]
            assert "--api-ca-bundle-webhook=jobrelay-managedby" in container["args"]
            assert not [m for m in container["volumeMounts"] if m["name"] == "api-tls"]
        else:
            assert not [a for a in container["args"] if a.startswith("--api-cert-secret")]
            assert [m for m in container["volumeMounts"] if m["name"] == "api-tls"]


def test_source_secret_without_a_ca_bundle_says_what_to_set() -> None:
    tools = chart_tools()
    for helm in (tools.helm, tools.helm4):
        result = subprocess.run(
            [str(helm), "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
             "--set", "api.certificate.source=secret",
             "--set", "api.certificate.secretName=relay-tls"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert result.returncode != 0, result.stdout
        assert "api.certificate.caBundle" in result.stderr, result.stderr


def _kind_and_name(document: dict[str, Any]) -> tuple[str, str]:
    return document["kind"], document["metadata"]["name"]


def test_the_value_sets_render_what_they_ask_for() -> None:
    helm = chart_tools().helm
    kinds = {
        name: sorted({doc["kind"] for doc in render(helm, values, release=rel, namespace=ns)})
        for name, (rel, ns, values) in VALUE_SETS.items()
    }
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "NetworkPolicy"):
        assert kind in kinds["everything-on"] and kind not in kinds["defaults"]
    assert "PodDisruptionBudget" in kinds["defaults"]
    assert "PodDisruptionBudget" not in kinds["secret-one-replica-renamed"]  # one replica
    (account,) = [
        doc for doc in render(helm, VALUE_SETS["secret-one-replica-renamed"][2],
                              release="ops", namespace="batch-relay")
        if doc["kind"] == "ServiceAccount"
    ]  # fmt: skip
    assert account["metadata"] == {**account["metadata"], "name": "relay-sa",
                                   "namespace": "batch-relay"}  # fmt: skip


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_services_monitors_and_policies_select_the_pods_and_name_their_ports(
    value_set: str,
) -> None:
    """Every Service, monitor, PDB and NetworkPolicy selects the Deployment's pods, and names
    only ports its container declares (health, metrics, api: the deployment interface)."""
    release, namespace, values = VALUE_SETS[value_set]
    rendered = render(chart_tools().helm, values, release=release, namespace=namespace)
    deployments = [doc for doc in rendered if doc["kind"] == "Deployment"]
    # templates/deployment.yaml comes from another change; until it is there, nothing to match.
    assert deployments or not (CHART / "templates" / "deployment.yaml").exists()
    for deployment in deployments:
        pod = deployment["spec"]["template"]
        labels = pod["metadata"]["labels"]
        (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "jobrelay"]
        ports = {port["name"] for port in container["ports"]}
        for doc in rendered:
            kind, spec = doc["kind"], doc.get("spec") or {}
            if kind == "Service":
                assert _matches(spec["selector"], labels), doc["metadata"]["name"]
                assert {p["targetPort"] for p in spec["ports"]} <= ports
            elif kind in ("PodMonitor", "PodDisruptionBudget"):
                assert _matches(spec["selector"]["matchLabels"], labels), kind
            elif kind == "NetworkPolicy":
                assert _matches(spec["podSelector"]["matchLabels"], labels), kind
                named = {p["port"] for rule in spec["ingress"] for p in rule["ports"]}
                assert named <= ports, named
        assert {"metrics", "health"} <= ports


def test_typod_values_are_refused() -> None:
    tools = chart_tools()
    for helm in (tools.helm, tools.helm4):
        result = subprocess.run(
            [str(helm), "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
             "--set", "monitoring.serviceMonitr.enabled=true"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert result.returncode != 0 and "serviceMonitr" in result.stderr, result.stderr


async def _resource_of(manager: ApiClient, document: dict[str, Any]) -> Resource:
    group, _, version = document["apiVersion"].rpartition("/")
    for found in await manager.discover(group, version):
        if found["kind"] == document["kind"] and "/" not in found["name"]:
            return Resource(group, version, found["name"], found["kind"], found["namespaced"])
    raise AssertionError(f"the manager serves no {document['kind']} in {document['apiVersion']}")


async def _install_crds(manager: ApiClient, crds: list[dict[str, Any]]) -> None:
    """The CRDs applied for real (left in place: nothing else uses their groups), then
    waited for until the apiserver serves them."""
    for crd in crds:
        await manager.patch(CRDS, crd["metadata"]["name"], crd, patch_type=PatchType.APPLY,
                            field_manager=FIELD_MANAGER, force=True)  # fmt: skip

    async def established() -> bool | None:
        for crd in crds:
            found = await manager.get(CRDS, crd["metadata"]["name"])
            conditions = (found.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return None
        return True

    await eventually(established, timeout=60, what="the third-party CRDs established")


@pytest.mark.parametrize("value_set", VALUE_SETS)
async def test_every_rendered_object_passes_a_server_side_dry_run(
    fleet: FleetHandle, value_set: str
) -> None:
    release, namespace, values = VALUE_SETS[value_set]
    tools = chart_tools()
    rendered = render(tools.helm, values, release=release, namespace=namespace)
    # Each object in a namespace of its own test run: a dry run needs the namespace to exist.
    test_namespace = f"{namespace}-{uuid.uuid4().hex[:6]}"
    async with fleet.client("manager") as manager:
        await _install_crds(manager, json.loads(tools.chart_crds.read_text()))
        await manager.create(NAMESPACES, {"metadata": {"name": test_namespace}})
        try:
            refused = []
            for document in rendered:
                resource = await _resource_of(manager, document)
                metadata = document["metadata"]
                # kube-system only for the aggregated API's authentication reader binding.
                where = test_namespace
                if resource.namespaced and metadata["namespace"] == "kube-system":
                    assert metadata["name"].endswith("-auth-reader"), metadata
                    where = "kube-system"
                elif resource.namespaced:
                    assert metadata["namespace"] == namespace, metadata
                    document = {**document, "metadata": {**metadata, "namespace": test_namespace}}
                try:
                    await manager.patch(
                        resource, metadata["name"], document,
                        namespace=where if resource.namespaced else None,
                        patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
                        dry_run=True,
                    )  # fmt: skip
                except ApiError as error:
                    refused.append(f"{document['kind']}/{metadata['name']}: {error}")
            assert not refused, "\n".join(refused)
        finally:
            await manager.delete(NAMESPACES, test_namespace)


def test_the_crds_are_rendered_from_their_one_copy_and_kept_on_uninstall() -> None:
    """templates/crds.yaml renders files/crds/ (the one copy) as it is, plus the release's
    labels and helm.sh/resource-policy: keep; crds.install=false renders none."""
    tools = chart_tools()
    rendered = [d for d in render(tools.helm, {}) if d["kind"] == "CustomResourceDefinition"]
    sources = {
        source["metadata"]["name"]: source
        for source in (yaml.safe_load(p.read_text()) for p in (CHART / "files" / "crds").iterdir())
    }
    assert sorted(d["metadata"]["name"] for d in rendered) == sorted(sources)
    for crd in rendered:
        metadata = crd["metadata"]
        assert metadata["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert metadata["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert {**crd, "metadata": {"name": metadata["name"]}} == sources[metadata["name"]]
    others = render(tools.helm, {"crds": {"install": False}})
    assert not [d for d in others if d["kind"] == "CustomResourceDefinition"]
