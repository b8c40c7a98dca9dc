"""`jobrelay run --cluster-profiles`: the flags reach the pool's options, the provider file is
read once at start, and what cannot be used is refused in one line before anything starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.unit.cli.test_run import _invoke, captured, kubeconfig

from jobrelay.controller.options import ControllerOptions
from jobrelay.fleet.cluster_profile_rules import AccessProviderConfig, ClusterProfileSettings

__all__ = ["captured", "kubeconfig"]  # the fixtures, shared with test_run.py

PLUGIN = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/bin/plugin"}


@pytest.fixture
def provider_file(tmp_path: Path) -> Path:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps({"providers": [{"name": "token", "execConfig": PLUGIN}]}))
    return path


def test_the_flags_reach_the_pools_options(
    captured: list[ControllerOptions], kubeconfig: str, provider_file: Path
) -> None:
    result = _invoke(
        "--cluster-profiles", "fleet", "--cluster-profile-selector", "env in (prod),!gpu",
        "--cluster-profile-access-providers", str(provider_file), kubeconfig=kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert captured[0].workers.cluster_profiles == ClusterProfileSettings(
        "fleet", "env in (prod),!gpu", (AccessProviderConfig("token", PLUGIN),), str(provider_file)
    )


def test_the_file_flag_takes_the_name_the_library_s_users_give_it(
    captured: list[ControllerOptions], kubeconfig: str, provider_file: Path
) -> None:
    result = _invoke(
        "--cluster-profiles", "fleet", "--clusterprofile-provider-file", str(provider_file),
        kubeconfig=kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    settings = captured[0].workers.cluster_profiles
    assert settings is not None and settings.provider_file == str(provider_file)


def test_without_the_flag_no_profile_is_a_worker(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    assert _invoke(kubeconfig=kubeconfig).exit_code == 0
    assert captured[0].workers.cluster_profiles is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cluster-profiles", "fleet"], "--cluster-profiles needs --cluster-profile-access-providers"),
        (["--cluster-profile-selector", "a=b"], "need --cluster-profiles NAMESPACE"),
        (["--cluster-profiles", "Fleet!", "--cluster-profile-access-providers", "{file}"], "is not a namespace name"),
        (["--cluster-profiles", "fleet", "--cluster-profile-selector", "a in (", "--cluster-profile-access-providers", "{file}"], "--cluster-profile-selector"),
        (["--cluster-profiles", "fleet", "--cluster-profile-access-providers", "{missing}"], "cannot read"),
        (["--cluster-profiles", "fleet", "--cluster-profile-access-providers", "{bad}"], 'providers[0] "token": execConfig: exec has no command'),
    ],
)  # fmt: skip
def test_what_cannot_be_used_is_refused_before_anything_starts(
    captured: list[ControllerOptions], kubeconfig: str, provider_file: Path,
    args: list[str], says: str,
) -> None:  # fmt: skip
    bad = provider_file.parent / "bad.json"
    bad.write_text(
        json.dumps({"providers": [{"name": "token", "execConfig": {"apiVersion": "x"}}]})
    )
    paths: dict[str, Any] = {"file": provider_file, "missing": provider_file.parent / "none",
                             "bad": bad}  # fmt: skip
    result = _invoke(*(a.format(**paths) for a in args), kubeconfig=kubeconfig)
    assert result.exit_code == 2, result.output
    assert says in result.output.replace("\n", " ").replace("  ", " ")
    assert not captured
