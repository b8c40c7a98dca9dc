"""Binary checks against fake scripts: versions, missing files, and what the messages advise;
the JobSet manifests as they are rendered from the module zip."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import (
    FakeBinaries,
    jobset_module_info,
    write_fake_manifests,
    write_go_binary,
    write_script,
)

from jobrelay.localfleet import binaries
from jobrelay.localfleet.binaries import BinaryError


def test_matching_fakes_resolve_to_their_paths(fake_binaries: FakeBinaries) -> None:
    directory = fake_binaries()
    found = binaries.resolve(build=False)
    assert found.kube_apiserver == directory / "kube-apiserver"
    assert found.kube_scheduler == directory / "kube-scheduler"
    assert found.etcd == directory / "etcd"
    assert found.kwok == directory / "kwok"


def test_any_patch_release_of_the_minor_is_accepted(fake_binaries: FakeBinaries) -> None:
    fake_binaries(kube_scheduler="Kubernetes v1.35.0-rc.1")
    assert binaries.resolve(build=False).kube_scheduler.name == "kube-scheduler"


def test_every_wrong_kubernetes_binary_is_named_in_one_message(
    fake_binaries: FakeBinaries,
) -> None:
    directory = fake_binaries(kube_apiserver="Kubernetes v1.34.2", kube_scheduler=None)
    (directory / "kube-controller-manager").chmod(0o644)
    with pytest.raises(BinaryError) as caught:
        binaries.resolve(build=False)
    message = str(caught.value)
    assert f"{directory}/kube-apiserver reports 'Kubernetes v1.34.2'" in message
    assert f"{directory}/kube-controller-manager is not an executable file" in message
    assert f"{directory}/kube-scheduler does not exist" in message
    assert f"JOBRELAY_K8S_BIN_DIR={directory}: point it at a directory holding" in message
    assert "or unset it" in message


def test_k8s_bin_dir_that_is_not_a_directory(
    fake_binaries: FakeBinaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = fake_binaries()
    monkeypatch.setenv("JOBRELAY_K8S_BIN_DIR", str(directory / "nope"))
    with pytest.raises(BinaryError, match=r"nope is not a directory \(JOBRELAY_K8S_BIN_DIR="):
        binaries.resolve(build=False)


def test_etcd_binary_pointing_nowhere(
    fake_binaries: FakeBinaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_binaries()
    monkeypatch.setenv("JOBRELAY_ETCD_BINARY", "/nowhere/etcd")
    with pytest.raises(BinaryError) as caught:
        binaries.resolve(build=False)
    assert str(caught.value) == (
        "/nowhere/etcd does not exist (JOBRELAY_ETCD_BINARY=/nowhere/etcd: point it at an "
        "etcd 3.4+ binary, or unset it to use the etcd on PATH)"
    )


def test_etcd_older_than_3_4_is_refused(fake_binaries: FakeBinaries) -> None:
    fake_binaries(etcd="etcd Version: 3.3.25\nGit SHA: abc")
    with pytest.raises(BinaryError, match=r"reports 'etcd Version: 3.3.25', but etcd 3.4"):
        binaries.resolve(build=False)


def test_kwok_binary_that_is_something_else(fake_binaries: FakeBinaries) -> None:
    fake_binaries(kwok="Kubernetes v1.35.4")
    with pytest.raises(BinaryError, match=r"reports 'Kubernetes v1.35.4', not kwok"):
        binaries.resolve(build=False)


def test_unbuilt_cache_says_to_build(
    fake_binaries: FakeBinaries,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fake_binaries()
    monkeypatch.delenv("JOBRELAY_K8S_BIN_DIR")
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path_factory.mktemp("empty-cache")))
    with pytest.raises(BinaryError, match=r"not built yet in .*: run `jobrelay fleet build`"):
        binaries.resolve(build=False)


# --- the JobSet controller ---------------------------------------------------


def test_jobset_fake_resolves_with_the_manifests_beside_it(fake_binaries: FakeBinaries) -> None:
    directory = fake_binaries()
    found = binaries.resolve(build=False)
    assert found.jobset_controller == directory / "jobset-controller"
    assert found.jobset_manifests == directory / binaries.JOBSET_MANIFESTS


def test_any_patch_release_of_the_jobset_minor_is_accepted(fake_binaries: FakeBinaries) -> None:
    fake_binaries(jobset_controller="v0.11.3")
    assert binaries.resolve(build=False).jobset_controller.name == "jobset-controller"


def test_jobset_of_another_minor_is_refused(fake_binaries: FakeBinaries) -> None:
    directory = fake_binaries(jobset_controller="v0.10.1")
    with pytest.raises(BinaryError) as caught:
        binaries.resolve(build=False)
    assert str(caught.value) == (
        f"{directory}/jobset-controller is JobSet v0.10.1, not v0.11.x "
        f"(JOBRELAY_JOBSET_BINARY={directory}/jobset-controller: point it at a JobSet "
        "controller v0.11.x (a Go build of sigs.k8s.io/jobset), or unset it to use "
        "jobrelay's own build)"
    )


def test_a_binary_that_is_not_jobset_is_refused(
    fake_binaries: FakeBinaries, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_binaries()
    kwok = write_go_binary(
        tmp_path / "kwok", jobset_module_info("v0.7.0", module="sigs.k8s.io/kwok")
    )
    monkeypatch.setenv("JOBRELAY_JOBSET_BINARY", str(kwok))
    with pytest.raises(BinaryError, match=r"kwok is not a JobSet controller \(it carries no Go"):
        binaries.resolve(build=False)
    script = write_script(tmp_path / "script", "not go")
    monkeypatch.setenv("JOBRELAY_JOBSET_BINARY", str(script))
    with pytest.raises(BinaryError, match=r"script is not a JobSet controller"):
        binaries.resolve(build=False)


def test_jobset_version_comes_from_the_module_or_the_linker_flags() -> None:
    assert binaries.jobset_version(jobset_module_info("v0.11.0")) == "v0.11.0"
    # Built inside a checkout: the module is (devel), the release is in -ldflags
    # (which Go records unless -trimpath is given).
    checkout = (
        "path\tsigs.k8s.io/jobset\nmod\tsigs.k8s.io/jobset\t(devel)\t\n"
        'build\t-ldflags="-X sigs.k8s.io/jobset/pkg/version.GitVersion=v0.11.2"\n'
    )
    assert binaries.jobset_version(checkout) == "v0.11.2"
    assert binaries.jobset_version(checkout.split("build")[0]) is None


def test_a_jobset_build_of_unknown_version_is_given_the_benefit_of_the_doubt(
    fake_binaries: FakeBinaries,
) -> None:
    fake_binaries(jobset_controller="(devel)")
    assert binaries.resolve(build=False).jobset_controller.name == "jobset-controller"


def test_go_module_info_of_files_that_are_not_go_binaries(tmp_path: Path) -> None:
    assert binaries.go_module_info(write_script(tmp_path / "sh", "x")) == ""
    (tmp_path / "empty").write_bytes(b"")
    assert binaries.go_module_info(tmp_path / "empty") == ""
    assert binaries.go_module_info(tmp_path / "missing") == ""


def test_unbuilt_jobset_says_to_build(
    fake_binaries: FakeBinaries,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fake_binaries()
    monkeypatch.delenv("JOBRELAY_JOBSET_BINARY")
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path_factory.mktemp("empty-cache")))
    with pytest.raises(
        BinaryError, match=r"JobSet controller is not built yet in .*jobset-controller-v0\.11\.0"
    ):
        binaries.resolve(build=False)


def test_jobset_override_takes_the_cached_manifests_when_none_are_beside_it(
    fake_binaries: FakeBinaries,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = fake_binaries()
    (directory / binaries.JOBSET_MANIFESTS).unlink()
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(cache))
    with pytest.raises(BinaryError, match=r"CRD, RBAC role and webhook configurations are not in"):
        binaries.resolve(build=False)
    cached = write_fake_manifests(cache / "bin" / f"jobset-controller-{binaries.JOBSET_VERSION}")
    assert binaries.resolve(build=False).jobset_manifests == cached


def module_zip(path: Path, files: dict[str, str]) -> Path:
    root = f"{binaries.JOBSET_MODULE}@{binaries.JOBSET_VERSION}/config/components/"
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
    manifests = binaries.jobset_manifests_from_zip(archive)
    assert manifests["version"] == binaries.JOBSET_VERSION
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
        binaries.jobset_manifests_from_zip(archive)
