"""`helm install` of the chart into the local fleet's manager, in a namespace other than
jobrelay-system, then `helm upgrade` from the previous chart version (the newest commit
whose Chart.yaml names another version) to the working tree's, then `helm uninstall`:
after each step every object of the release is on the apiserver as rendered, and
nothing is left of what the step dropped. The Deployment's pods need not run (the image
is not on the fleet).

And the CRD upgrade (issue 35): from chart 0.2.0 (commit de8e6b7, its CRDs in crds/,
which Helm never upgrades) to the working tree's (CRDs as templates), through the
adoption step the chart's README documents, `helm upgrade` changes a CRD field on the
cluster, and `helm uninstall` keeps the CRDs."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import uuid
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS, NAMESPACES
from jobrelay.vocabulary.resource import Resource
from tests.chart_render import CHART, REPO, chart_tools, objects
from tests.conftest import FleetHandle

pytestmark = pytest.mark.integration

CHART_FILE = "charts/jobrelay/Chart.yaml"
# Its own controller name: the admission policies it installs then match no Job of the
# other tests (jobrelay.dev/relay) while it is installed.
VALUES: dict[str, Any] = {"controllerName": "chart-test.jobrelay.dev/relay"}
# For the upgrade when there is no previous version: what changes objects both ways.
CHANGED_VALUES: dict[str, Any] = {
    **VALUES,
    "replicaCount": 1,  # the PodDisruptionBudget goes
    "monitoring": {"grafanaDashboard": {"enabled": True}},  # a ConfigMap comes
}


# Chart 0.2.0, the last whose CRDs sat in crds/.
CRDS_IN_CRDS_DIR = "de8e6b7"
CRD_NAMES = ("workerclusters.jobrelay.dev", "relayqueues.jobrelay.dev")


def adopt_crds(kubeconfig: Path, release: str, namespace: str) -> None:
    """The step charts/jobrelay/README.md ("Upgrading from chart 0.2.0 or earlier")
    documents, as written there: the CRDs labelled and annotated for the release."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "the chart tests need kubectl on the PATH"
    for step in (
        ["label", "crd", *CRD_NAMES, "app.kubernetes.io/managed-by=Helm", "--overwrite"],
        ["annotate", "crd", *CRD_NAMES, f"meta.helm.sh/release-name={release}",
         f"meta.helm.sh/release-namespace={namespace}", "--overwrite"],
    ):  # fmt: skip
        done = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), *step],
                              capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        assert done.returncode == 0, f"kubectl {' '.join(step)}:\n{done.stderr}"


def _chart_version(text: str) -> str:
    version: str = yaml.safe_load(text)["version"]
    return version


def previous_chart_version() -> tuple[str, str] | None:
    """(commit, version) of the newest commit whose Chart.yaml names a version other than
    the working tree's; None when history has none (or is not there)."""
    current = _chart_version((REPO / CHART_FILE).read_text())
    log = subprocess.run(
        ["git", "log", "--format=%H", "--", CHART_FILE],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if log.returncode != 0:
        return None
    for commit in log.stdout.split():
        shown = subprocess.run(
            ["git", "show", f"{commit}:{CHART_FILE}"],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if shown.returncode == 0 and _chart_version(shown.stdout) != current:
            return commit, _chart_version(shown.stdout)
    return None


def chart_of_commit(commit: str, destination: Path) -> Path:
    """The chart as it was at ``commit`` (`git archive`), extracted under ``destination``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "charts/jobrelay"],
        cwd=REPO, capture_output=True, check=True,
    )  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(destination, filter="data")
    return destination / "charts" / "jobrelay"


class Helm:
    """helm (3 or 4) on the fleet's manager, for one release in one namespace."""

    def __init__(self, binary: Path, kubeconfig: Path, release: str, namespace: str, work: Path):
        self.binary, self.kubeconfig = binary, kubeconfig
        self.release, self.namespace, self.work = release, namespace, work

    def __call__(self, *args: str, values: dict[str, Any] | None = None) -> str:
        argv = [str(self.binary), *args, "--namespace", self.namespace,
                "--kubeconfig", str(self.kubeconfig)]  # fmt: skip
        if values is not None:
            values_file = self.work / f"values-{uuid.uuid4().hex[:6]}.json"
            values_file.write_text(json.dumps(values))
            argv += ["--values", str(values_file)]
        result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}{result.stderr}"
        return result.stdout

    def manifest(self) -> list[dict[str, Any]]:
        return objects(self("get", "manifest", self.release))

    def uninstall_if_there(self) -> None:
        subprocess.run(
            [str(self.binary), "uninstall", self.release, "--namespace", self.namespace,
             "--kubeconfig", str(self.kubeconfig), "--ignore-not-found"],
            capture_output=True, check=False, timeout=300,
        )  # fmt: skip


def _contains(live: Any, rendered: Any, where: str = "") -> list[str]:
    """Where ``live`` differs from ``rendered`` (the apiserver may add defaults, so only
    what was rendered is compared)."""
    if isinstance(rendered, dict):
        if not isinstance(live, dict):
            return [f"{where}: {live!r} is not a map"]
        return [
            difference
            for key, value in rendered.items()
            for difference in _contains(live.get(key), value, f"{where}.{key}")
        ]
    if isinstance(rendered, list):
        if not isinstance(live, list) or len(live) != len(rendered):
            return [f"{where}: {live!r} != {rendered!r}"]
        return [
            difference
            for index, (item, wanted) in enumerate(zip(live, rendered, strict=True))
            for difference in _contains(item, wanted, f"{where}[{index}]")
        ]
    if live == rendered or str(live) == str(rendered):
        return []
    return [f"{where}: {live!r} != {rendered!r}"]


async def _resource_of(manager: ApiClient, document: dict[str, Any]) -> Resource:
    group, _, version = document["apiVersion"].rpartition("/")
    for found in await manager.discover(group, version):
        if found["kind"] == document["kind"] and "/" not in found["name"]:
            return Resource(group, version, found["name"], found["kind"], found["namespaced"])
    raise AssertionError(f"the manager serves no {document['kind']} in {document['apiVersion']}")


def _namespace_of(document: dict[str, Any], resource: Resource) -> str | None:
    return str(document["metadata"].get("namespace")) if resource.namespaced else None


async def assert_on_the_apiserver(manager: ApiClient, manifest: list[dict[str, Any]]) -> None:
    differences = []
    for document in manifest:
        resource = await _resource_of(manager, document)
        name = document["metadata"]["name"]
        live = await manager.get(resource, name, namespace=_namespace_of(document, resource))
        differences += [
            f"{document['kind']}/{name}{where}"
            for where in _contains(live, {k: v for k, v in document.items() if k != "status"})
        ]
    assert not differences, "\n".join(differences)


async def assert_gone(manager: ApiClient, documents: list[dict[str, Any]]) -> None:
    left = []
    for document in documents:
        resource = await _resource_of(manager, document)
        name = document["metadata"]["name"]
        try:
            live = await manager.get(resource, name, namespace=_namespace_of(document, resource))
        except ApiError as error:
            if error.is_not_found:
                continue
            raise
        if not live["metadata"].get("deletionTimestamp"):
            left.append(f"{document['kind']}/{name}")
    assert not left, f"left behind: {left}"


def _keys(documents: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in documents}


@pytest.mark.parametrize("major", [3, 4], ids=["helm3", "helm4"])
async def test_install_upgrade_from_the_previous_version_and_uninstall(
    fleet: FleetHandle, tmp_path: Path, major: int
) -> None:
    namespace = f"relay-chart-{uuid.uuid4().hex[:6]}"
    tools = chart_tools()
    binary = tools.helm if major == 3 else tools.helm4
    helm = Helm(binary, fleet.kubeconfig("manager"), "relay", namespace, tmp_path)
    previous = previous_chart_version()
    if previous:
        commit, version = previous
        first_chart, first_values, second_values = chart_of_commit(commit, tmp_path), VALUES, VALUES
        print(f"upgrading from chart {version} ({commit[:12]}) to the working tree's")
    else:
        first_chart, first_values, second_values = CHART, VALUES, CHANGED_VALUES
        print("no earlier chart version in git history: upgrading the working tree's chart "
              "to changed values instead")  # fmt: skip
    async with fleet.client("manager") as manager:
        try:
            # The fleet's CRDs exist (owned by no release, or an earlier test's): adopted
            # first, as docs/install.md says for a manager that has them already.
            adopt_crds(fleet.kubeconfig("manager"), helm.release, namespace)
            # Helm 4 applies server-side: the CRDs' fields other tools wrote last (Helm 3,
            # the fleet's apply) need --force-conflicts, as docs/install.md says.
            adopting = ("--force-conflicts",) if major == 4 else ()
            helm(
                "install", helm.release, str(first_chart), "--create-namespace", *adopting,
                values=first_values,
            )  # fmt: skip
            installed = helm.manifest()
            await assert_on_the_apiserver(manager, installed)

            helm("upgrade", helm.release, str(CHART), *adopting, values=second_values)
            upgraded = helm.manifest()
            assert upgraded, "the working tree's chart rendered nothing"
            # The one exception: an aggregated API reads the front proxy's settings by a
            # RoleBinding in kube-system to Kubernetes' extension-apiserver-authentication-reader.
            assert all(
                d["metadata"].get("namespace", namespace) == namespace
                or (d["kind"], d["metadata"]["name"], d["metadata"]["namespace"])
                == ("RoleBinding", f"{helm.release}-jobrelay-auth-reader", "kube-system")
                for d in upgraded
            ), "an object outside the release's namespace"
            await assert_on_the_apiserver(manager, upgraded)
            dropped = [d for d in installed if (d["kind"], d["metadata"]["name"]) not in _keys(upgraded)]  # fmt: skip
            await assert_gone(manager, dropped)
            if not previous:
                assert ("ConfigMap", "relay-jobrelay-dashboard") in _keys(upgraded)
                assert ("PodDisruptionBudget", "relay-jobrelay") in _keys(installed) - _keys(upgraded)  # fmt: skip

            helm("uninstall", helm.release, "--wait")
            kept = [d for d in upgraded if d["kind"] == "CustomResourceDefinition"]
            assert len(kept) == len(CRD_NAMES)  # helm.sh/resource-policy: keep
            await assert_on_the_apiserver(manager, kept)
            await assert_gone(manager, [d for d in upgraded if d not in kept])
        finally:
            helm.uninstall_if_there()
            try:
                await manager.delete(NAMESPACES, namespace)
            except ApiError as error:
                if not error.is_not_found:
                    raise


def _commit(short: str) -> str | None:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{short}^{{commit}}"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return found.stdout.strip() if found.returncode == 0 else None


async def test_helm_upgrade_from_chart_0_2_0_upgrades_its_crds(
    fleet: FleetHandle, tmp_path: Path
) -> None:
    commit = _commit(CRDS_IN_CRDS_DIR)
    if commit is None:
        pytest.skip(f"commit {CRDS_IN_CRDS_DIR} (chart 0.2.0, CRDs in crds/) is not in this "
                    "clone (a shallow one?): fetch the history to run the CRD upgrade")  # fmt: skip
    old_chart = chart_of_commit(commit, tmp_path)
    namespace = f"relay-crds-{uuid.uuid4().hex[:6]}"
    helm = Helm(chart_tools().helm, fleet.kubeconfig("manager"), "crdup", namespace, tmp_path)
    async with fleet.client("manager") as manager:
        # The cluster as chart 0.2.0's `helm install` left it: its CRDs, owned by no release.
        for path in sorted((old_chart / "crds").iterdir()):
            old = yaml.safe_load(path.read_text())
            name = old["metadata"]["name"]
            live = await manager.get(CRDS, name)
            version = live["metadata"]["resourceVersion"]
            await manager.replace(CRDS, {**old, "metadata": {"name": name, "resourceVersion": version}})  # fmt: skip
        for name in CRD_NAMES:
            assert "categories" not in (await manager.get(CRDS, name))["spec"]["names"]
        try:
            helm("install", helm.release, str(old_chart), "--create-namespace", values=VALUES)
            adopt_crds(fleet.kubeconfig("manager"), helm.release, namespace)
            helm("upgrade", helm.release, str(CHART), values=VALUES)
            for name in CRD_NAMES:
                live = await manager.get(CRDS, name)
                assert live["spec"]["names"]["categories"] == ["jobrelay"], name  # the new field
                assert live["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
            helm("uninstall", helm.release, "--wait")
            for name in CRD_NAMES:  # kept: deleting them would delete every WorkerCluster
                assert not (await manager.get(CRDS, name))["metadata"].get("deletionTimestamp")
        finally:
            helm.uninstall_if_there()
            try:
                await manager.delete(NAMESPACES, namespace)
            except ApiError as error:
                if not error.is_not_found:
                    raise
