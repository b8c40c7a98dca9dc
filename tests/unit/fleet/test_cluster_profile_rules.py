"""Workers from ClusterProfiles: the provider file, the access chosen, health, name conflicts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.fleet.cluster_profile_rules import (
    CLUSTER_PROFILE_REFUSED,
    NAME_CONFLICT_CONDITION,
    AccessProviderConfig,
    ProfileAccess,
    ProfileRefusal,
    ProviderFileError,
    control_plane_problem,
    name_conflict_condition,
    parse_provider_file,
    profile_access,
    profile_identity,
    profile_kubeconfig,
)
from jobrelay.fleet.credentials import KubeconfigRefused, check_kubeconfig
from jobrelay.fleet.workers.status_rules import Written, needs_write

V1BETA1 = "client.authentication.k8s.io/v1beta1"
PLUGIN = {"apiVersion": V1BETA1, "command": "/bin/token-plugin", "args": ["--cluster", "x"]}
CA = "Y2E="  # base64 of "ca"


def provider_file(*providers: dict[str, Any]) -> str:
    return json.dumps({"providers": list(providers)})


def providers(*names: str) -> tuple[AccessProviderConfig, ...]:
    return tuple(AccessProviderConfig(name, PLUGIN) for name in names)


def profile(*entries: tuple[str, dict[str, Any]], field: str = "accessProviders") -> dict[str, Any]:
    return {
        "metadata": {"name": "east", "namespace": "fleet"},
        "status": {field: [{"name": name, "cluster": cluster} for name, cluster in entries]},
    }


SERVER = {"server": "https://east:6443", "certificate-authority-data": CA}


# -- the provider file ----------------------------------------------------------------


def test_the_library_example_file_is_read_with_its_v1_plugin_spoken_as_v1beta1() -> None:
    # cluster-inventory-api v0.1.2, examples/controller-example/plugins/secretreader.
    text = provider_file(
        {
            "name": "secretreader",
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "args": None,
                "command": "./bin/secretreader-plugin",
                "env": None,
                "provideClusterInfo": True,
            },
        }
    )
    (read,) = parse_provider_file(text, "providers.json")
    assert read.name == "secretreader"
    assert read.exec_config == {"apiVersion": V1BETA1, "command": "./bin/secretreader-plugin"}


def test_yaml_is_read_too() -> None:
    text = (
        "providers:\n- name: token\n  execConfig:\n    apiVersion: "
        + V1BETA1
        + ("\n    command: plugin\n    env: [{name: A, value: b}]\n")
    )
    (read,) = parse_provider_file(text, "f")
    assert read.exec_config["env"] == [{"name": "A", "value": "b"}]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "not an access-provider file"),
        ("[]", "not an access-provider file"),
        ('{"providers": {}}', "not an access-provider file"),
        ("{providers: [", "f:"),
        (provider_file({"execConfig": PLUGIN}), "providers[0] has no name"),
        (provider_file("x"), "providers[0] is not a mapping"),  # type: ignore[arg-type]
        (provider_file({"name": "a"}), 'providers[0] "a" has no execConfig'),
        (
            provider_file({"name": "a", "execConfig": PLUGIN}, {"name": "a", "execConfig": PLUGIN}),
            'providers[1] "a": a second provider of that name',
        ),
        (
            provider_file({"name": "a", "execConfig": {"apiVersion": V1BETA1}}),
            "execConfig: exec has no command",
        ),
        (
            provider_file({"name": "a", "execConfig": {**PLUGIN, "apiVersion": "v9"}}),
            "exec apiVersion is not one jobrelay speaks",
        ),
        (
            provider_file({"name": "a", "execConfig": {**PLUGIN, "args": "--all"}}),
            "exec args is not a list of strings",
        ),
        (
            provider_file(
                {"name": "a", "execConfig": PLUGIN, "profileSourcedCLIArgsPolicy": "Append"}
            ),
            "profileSourcedCLIArgsPolicy other than Ignore is not supported",
        ),
        ("[" * 100, "nested deeper"),
    ],
)
def test_a_file_jobrelay_cannot_use_is_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ProviderFileError) as refused:
        parse_provider_file(text, "f")
    assert says in str(refused.value)
    assert str(refused.value).startswith("f")
    assert "\n" not in str(refused.value)


def test_ignore_policies_are_accepted() -> None:
    entry = {"name": "a", "execConfig": PLUGIN, "profileSourcedCLIArgsPolicy": "Ignore",
             "profileSourcedEnvVarsPolicy": "Ignore"}  # fmt: skip
    assert parse_provider_file(provider_file(entry), "f")[0].name == "a"


# -- which access provider ------------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "file", "chosen"),
    [
        (["token"], ["token"], "token"),
        (["other", "token"], ["token"], "token"),
        # The file's order decides, as the library's getClusterAccessorFromClusterProfile.
        (["b", "a"], ["a", "b"], "a"),
        (["a", "b"], ["b", "a"], "b"),
    ],
)
def test_the_first_provider_of_the_file_that_the_profile_offers_is_used(
    offered: list[str], file: list[str], chosen: str
) -> None:
    access = profile_access(profile(*((name, SERVER) for name in offered)), providers(*file))
    assert isinstance(access, ProfileAccess)
    assert access.provider == chosen
    assert access.cluster == SERVER
    assert access.exec_config == PLUGIN


def test_the_deprecated_credential_providers_count_and_access_providers_win_a_name() -> None:
    old = profile(("token", {"server": "https://old"}), field="credentialProviders")
    assert profile_access(old, providers("token")).cluster == {"server": "https://old"}  # type: ignore[union-attr]
    both = {
        **old,
        "status": {**old["status"], "accessProviders": [{"name": "token", "cluster": SERVER}]},
    }
    assert profile_access(both, providers("token")).cluster == SERVER  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("obj", "says"),
    [
        ({"metadata": {"name": "east"}}, "lists no status.accessProviders"),
        (profile(), "lists no status.accessProviders"),
        (
            profile(("other", SERVER)),
            "its access providers (other) are none of the access-provider file's (token)",
        ),
        (profile(("token", {})), "names no cluster server"),
        (profile(("token", {"certificate-authority-data": CA})), "names no cluster server"),
    ],
)
def test_a_profile_without_a_provider_of_the_file_is_refused(
    obj: dict[str, Any], says: str
) -> None:
    access = profile_access(obj, providers("token"))
    assert isinstance(access, ProfileRefusal)
    assert access.reason == CLUSTER_PROFILE_REFUSED
    assert says in access.message


def test_an_odd_provider_name_is_not_quoted() -> None:
    access = profile_access(profile(("x" * 200, SERVER)), providers("token"))
    assert isinstance(access, ProfileRefusal)
    assert "x" * 100 not in access.message


@given(
    offered=st.lists(st.sampled_from("abcdef"), unique=True, max_size=6),
    file=st.lists(st.sampled_from("abcdef"), unique=True, max_size=6),
)
def test_exec_runs_only_for_a_provider_the_file_names(offered: list[str], file: list[str]) -> None:
    access = profile_access(profile(*((n, SERVER) for n in offered)), providers(*file))
    common = [name for name in file if name in offered]
    if common:
        assert isinstance(access, ProfileAccess) and access.provider == common[0]
    else:
        assert isinstance(access, ProfileRefusal)


# -- the kubeconfig and its identity --------------------------------------------------


def test_the_kubeconfig_is_one_the_secret_rules_accept_with_exec() -> None:
    access = ProfileAccess("token", {**SERVER, "tls-server-name": "east"}, PLUGIN)
    config = profile_kubeconfig(access)
    check_kubeconfig(config, allow_exec=True)
    assert config["clusters"][0]["cluster"]["server"] == "https://east:6443"
    assert config["users"][0]["user"] == {"exec": PLUGIN}
    with pytest.raises(KubeconfigRefused, match="exec credential plugins are refused"):
        check_kubeconfig(config, allow_exec=False)


@pytest.mark.parametrize(
    ("cluster", "says"),
    [
        ({**SERVER, "insecure-skip-tls-verify": True}, "insecure-skip-tls-verify: true is refused"),
        ({**SERVER, "certificate-authority": "/etc/ca"}, "certificate-authority names a file"),
        ({"server": "https://e", "certificate-authority-data": "abc"}, "not valid base64"),
    ],
)
def test_an_unsafe_cluster_entry_of_a_profile_is_refused_as_in_a_secret(
    cluster: dict[str, Any], says: str
) -> None:
    with pytest.raises(KubeconfigRefused, match=says):
        profile_kubeconfig(ProfileAccess("token", cluster, PLUGIN))


def test_extensions_are_not_passed_to_the_client() -> None:
    entry = {
        **SERVER,
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {}}],
    }
    access = profile_access(profile(("token", entry)), providers("token"))
    assert isinstance(access, ProfileAccess) and "extensions" not in access.cluster


def test_the_identity_changes_with_what_the_connection_is_built_from_only() -> None:
    one = profile(("token", SERVER))
    same = {
        **one,
        "status": {**one["status"], "conditions": [{"type": "Joined", "status": "True"}]},
    }
    moved = profile(("token", {**SERVER, "server": "https://west"}))
    ids = [profile_identity(profile_access(p, providers("token"))) for p in (one, same, moved)]
    assert ids[0] == ids[1] != ids[2]
    refused = profile_identity(profile_access(profile(), providers("token")))
    assert refused[0] == "refused"


# -- health ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "problem"),
    [
        (None, None),
        ([], None),
        ([{"type": "Joined", "status": "False"}], None),
        ([{"type": "ControlPlaneHealthy", "status": "True"}], None),
        ([{"type": "ControlPlaneHealthy", "status": "Unknown"}], None),
        (
            [{"type": "ControlPlaneHealthy", "status": "False"}],
            "its ClusterProfile says ControlPlaneHealthy=False",
        ),
        (
            [
                {
                    "type": "ControlPlaneHealthy",
                    "status": "False",
                    "reason": "Down",
                    "message": "etcd",
                }
            ],
            "its ClusterProfile says ControlPlaneHealthy=False (Down: etcd)",
        ),
        ("junk", None),
    ],
)
def test_health_is_read_from_the_control_plane_condition(
    conditions: Any, problem: str | None
) -> None:
    assert control_plane_problem({"status": {"conditions": conditions}}) == problem


def test_a_name_conflict_names_the_profile_and_who_wins() -> None:
    condition = name_conflict_condition("fleet", "east")
    assert condition["type"] == NAME_CONFLICT_CONDITION
    assert condition["status"] == "True"
    assert "ClusterProfile fleet/east" in condition["message"]
    assert "this WorkerCluster stays the worker and the profile is refused" in condition["message"]


@pytest.mark.parametrize(
    ("before", "now", "written"),
    [
        ((), (), False),
        ((), (name_conflict_condition("fleet", "east"),), True),
        ((name_conflict_condition("fleet", "east"),), (), True),
        ((name_conflict_condition("fleet", "east"),), (name_conflict_condition("fleet", "east"),), False),
    ],
)  # fmt: skip
def test_a_conflict_condition_that_comes_or_goes_is_written_at_once(
    before: tuple[dict[str, str], ...], now: tuple[dict[str, str], ...], written: bool
) -> None:
    connected = {"type": "Connected", "status": "False", "reason": "Timeout", "message": "m"}
    previous = Written(connected, 0, None, 0.0, others=before)
    assert needs_write(previous, connected, 0, None, 1.0, others=now) is written


def test_what_a_profile_says_is_bounded_before_jobrelay_repeats_it() -> None:
    many = profile(*((f"p-{i}", SERVER) for i in range(5_000)))
    access = profile_access(many, providers("token"))
    assert isinstance(access, ProfileRefusal)
    assert "p-0, p-1" in access.message and "and 4990 more" in access.message
    assert len(access.message) < 500
    said = {"type": "ControlPlaneHealthy", "status": "False", "reason": "Down",
            "message": "x\n" * 100_000}  # fmt: skip
    problem = control_plane_problem({"status": {"conditions": [said]}})
    assert problem is not None and problem.startswith("its ClusterProfile says")
    assert len(problem) < 400 and "\n" not in problem
