"""Binary checks against fake scripts: versions, missing files, and what the messages advise."""

from __future__ import annotations

import pytest
from tests.unit.localfleet.fakes import FakeBinaries

from jobrelay.localfleet.binaries import BinaryError, resolver


def test_matching_fakes_resolve_to_their_paths(fake_binaries: FakeBinaries) -> None:
    directory = fake_binaries()
    found = resolver.resolve(build=False)
    assert found.kube_apiserver == directory / "kube-apiserver"
    assert found.kube_scheduler == directory / "kube-scheduler"
    assert found.etcd == directory / "etcd"
    assert found.kwok == directory / "kwok"


def test_any_patch_release_of_the_minor_is_accepted(fake_binaries: FakeBinaries) -> None:
    fake_binaries(kube_scheduler="Kubernetes v1.35.0-rc.1")
    assert resolver.resolve(build=False).kube_scheduler.name == "kube-scheduler"


def test_every_wrong_kubernetes_binary_is_named_in_one_message(
    fake_binaries: FakeBinaries,
) -> None:
    directory = fake_binaries(kube_apiserver="Kubernetes v1.34.2", kube_scheduler=None)
    (directory / "kube-controller-manager").chmod(0o644)
    with pytest.raises(BinaryError) as caught:
        resolver.resolve(build=False)
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
        resolver.resolve(build=False)


def test_etcd_binary_pointing_nowhere(
    fake_binaries: FakeBinaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_binaries()
    monkeypatch.setenv("JOBRELAY_ETCD_BINARY", "/nowhere/etcd")
    with pytest.raises(BinaryError) as caught:
        resolver.resolve(build=False)
    assert str(caught.value) == (
        "/nowhere/etcd does not exist (JOBRELAY_ETCD_BINARY=/nowhere/etcd: point it at an "
        "etcd 3.4+ binary, or unset it to use the etcd on PATH)"
    )


def test_etcd_older_than_3_4_is_refused(fake_binaries: FakeBinaries) -> None:
    fake_binaries(etcd="etcd Version: 3.3.25\nGit SHA: abc")
    with pytest.raises(BinaryError, match=r"reports 'etcd Version: 3.3.25', but etcd 3.4"):
        resolver.resolve(build=False)


def test_kwok_binary_that_is_something_else(fake_binaries: FakeBinaries) -> None:
    fake_binaries(kwok="Kubernetes v1.35.4")
    with pytest.raises(BinaryError, match=r"reports 'Kubernetes v1.35.4', not kwok"):
        resolver.resolve(build=False)


def test_unbuilt_cache_says_to_build(
    fake_binaries: FakeBinaries,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fake_binaries()
    monkeypatch.delenv("JOBRELAY_K8S_BIN_DIR")
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path_factory.mktemp("empty-cache")))
    with pytest.raises(BinaryError, match=r"not built yet in .*: run `jobrelay fleet build`"):
        resolver.resolve(build=False)
