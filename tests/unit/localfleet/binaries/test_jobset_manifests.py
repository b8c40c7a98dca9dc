"""The JobSet manifests as they are rendered from the module zip."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.jobset_manifests import jobset_manifests_from_zip
from jobrelay.localfleet.binaries.versions import JOBSET_MODULE, JOBSET_VERSION


def module_zip(path: Path, files: dict[str, str]) -> Path:
    root = f"{JOBSET_MODULE}@{JOBSET_VERSION}/config/components/"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(root + name, text)
    return path


WEBHOOK_MANIFESTS = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mjobset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-jobset}}
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-pod}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: vjobset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-jobset}}
"""
KUSTOMIZATION = """\
resources: [manifests.yaml]
patches:
- path: patches/mutating-patch.yaml
  target: {kind: MutatingWebhookConfiguration, name: mutating-webhook-configuration}
"""
MUTATING_PATCH = """\
- op: add
  path: /webhooks/1/objectSelector
  value: {matchExpressions: [{key: jobset.sigs.k8s.io/jobset-name, operator: Exists}]}
"""


def test_manifests_are_rendered_from_the_module_zip_as_upstream_deploys_them(
    tmp_path: Path,
) -> None:
    archive = module_zip(
        tmp_path / "jobset.zip",
        {
            "crd/bases/jobset.x-k8s.io_jobsets.yaml": "---\nkind: CustomResourceDefinition\n"
            "metadata: {name: jobsets.jobset.x-k8s.io}\n",
            "rbac/role.yaml": "---\nkind: ClusterRole\nmetadata: {name: manager-role}\nrules: []\n",
            "webhook/manifests.yaml": WEBHOOK_MANIFESTS,
            "webhook/kustomization.yaml": KUSTOMIZATION,
            "webhook/patches/mutating-patch.yaml": MUTATING_PATCH,
        },
    )
    manifests = jobset_manifests_from_zip(archive)
    assert manifests["version"] == JOBSET_VERSION
    assert manifests["crd"]["metadata"]["name"] == "jobsets.jobset.x-k8s.io"
    assert manifests["clusterRole"]["metadata"]["name"] == "jobset-manager-role"
    mutating, validating = manifests["webhookConfigurations"]
    assert mutating["metadata"]["name"] == "jobset-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "jobset-validating-webhook-configuration"
    assert "objectSelector" not in mutating["webhooks"][0]
    assert mutating["webhooks"][1]["objectSelector"]["matchExpressions"][0]["operator"] == "Exists"


def test_a_zip_without_the_expected_files_is_a_binary_error(tmp_path: Path) -> None:
    archive = module_zip(tmp_path / "jobset.zip", {"rbac/role.yaml": "kind: ClusterRole\n"})
    with pytest.raises(BinaryError, match=r"does not hold the JobSet manifests jobrelay expects"):
        jobset_manifests_from_zip(archive)
