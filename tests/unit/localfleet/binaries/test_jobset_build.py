"""The JobSet controller: recognised by the Go module information in the binary (read
through a fake ``go``), and found or asked to be built."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import (
    FakeBinaries,
    jobset_module_info,
    write_fake_manifests,
    write_go_binary,
    write_script,
)

from jobrelay.localfleet.binaries import BinaryError, resolver
from jobrelay.localfleet.binaries.jobset_build import check_jobset, jobset_version
from jobrelay.localfleet.binaries.jobset_manifests import JOBSET_MANIFESTS
from jobrelay.localfleet.binaries.versions import JOBSET_VERSION


def test_jobset_fake_resolves_with_the_manifests_beside_it(fake_binaries: FakeBinaries) -> None:
    directory = fake_binaries()
    found = resolver.resolve(build=False)
    assert found.jobset_controller == directory / "jobset-controller"
    assert found.jobset_manifests == directory / JOBSET_MANIFESTS


def test_any_patch_release_of_the_jobset_minor_is_accepted(fake_binaries: FakeBinaries) -> None:
    fake_binaries(jobset_controller="v0.11.3")
    assert resolver.resolve(build=False).jobset_controller.name == "jobset-controller"


def test_jobset_of_another_minor_is_refused(fake_binaries: FakeBinaries) -> None:
    directory = fake_binaries(jobset_controller="v0.10.1")
    with pytest.raises(BinaryError) as caught:
        resolver.resolve(build=False)
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
        resolver.resolve(build=False)
    script = write_script(tmp_path / "script", "not go")
    monkeypatch.setenv("JOBRELAY_JOBSET_BINARY", str(script))
    with pytest.raises(BinaryError, match=r"script is not a JobSet controller"):
        resolver.resolve(build=False)


def test_jobset_version_comes_from_the_module_or_the_linker_flags() -> None:
    assert jobset_version(jobset_module_info("v0.11.0")) == "v0.11.0"
    # Built inside a checkout: the module is (devel), the release is in -ldflags
    # (which Go records unless -trimpath is given).
    checkout = (
        "path\tsigs.k8s.io/jobset\nmod\tsigs.k8s.io/jobset\t(devel)\t\n"
        'build\t-ldflags="-X sigs.k8s.io/jobset/pkg/version.GitVersion=v0.11.2"\n'
    )
    assert jobset_version(checkout) == "v0.11.2"
    assert jobset_version(checkout.split("build")[0]) is None


def test_a_jobset_build_of_unknown_version_is_given_the_benefit_of_the_doubt(
    fake_binaries: FakeBinaries,
) -> None:
    fake_binaries(jobset_controller="(devel)")
    assert resolver.resolve(build=False).jobset_controller.name == "jobset-controller"


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
        resolver.resolve(build=False)


def test_jobset_override_takes_the_cached_manifests_when_none_are_beside_it(
    fake_binaries: FakeBinaries,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = fake_binaries()
    (directory / JOBSET_MANIFESTS).unlink()
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(cache))
    with pytest.raises(BinaryError, match=r"CRD, RBAC role and webhook configurations are not in"):
        resolver.resolve(build=False)
    cached = write_fake_manifests(cache / "bin" / f"jobset-controller-{JOBSET_VERSION}")
    assert resolver.resolve(build=False).jobset_manifests == cached


def test_without_go_an_executable_override_is_given_the_benefit_of_the_doubt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `go version -m` reads the module information: a machine without Go cannot tell.
    monkeypatch.setenv("PATH", str(tmp_path / "no-go-here"))
    check_jobset(write_script(tmp_path / "controller", "not go"), hint="h")
    with pytest.raises(BinaryError, match=r"missing does not exist \(h\)"):
        check_jobset(tmp_path / "missing", hint="h")
