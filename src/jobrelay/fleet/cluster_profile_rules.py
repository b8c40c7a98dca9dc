"""Workers from ClusterProfiles: which profiles, which credentials, what health; pure, no I/O.

A ClusterProfile (``multicluster.x-k8s.io/v1alpha1``, KEP-4322, sigs.k8s.io/cluster-inventory-api
v0.1.2) describes one cluster; its cluster manager writes ``status.accessProviders``: each a
``name`` and a ``cluster`` (a kubeconfig cluster: ``server``, ``certificate-authority-data``,
...). The admin's access-provider file (KEP-5339, the library's ``pkg/access``) maps provider
names to exec credential plugins::

    {"providers": [{"name": "token", "execConfig": {"apiVersion": ..., "command": ...}}]}

A profile is connected as the library's ``BuildConfigFromCP`` does: its first access provider,
in the file's order, that the file names (``credentialProviders``, deprecated, count too;
``accessProviders`` wins a name in both) gives the server and CA; the file gives the exec
plugin. A plugin runs only when the file names it: a profile naming none of the file's
providers is refused, and the kubeconfig built is checked by the same rules as a WorkerCluster's
Secret (fleet/credentials.py), with exec allowed because the admin's file chose it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from jobrelay.fleet import credentials
from jobrelay.kube.redact import yaml_problem

__all__ = [
    "CLUSTER_PROFILE_REFUSED",
    "CONTROL_PLANE_HEALTHY",
    "CONTROL_PLANE_UNHEALTHY",
    "NAME_CONFLICT_CONDITION",
    "AccessProviderConfig",
    "ClusterProfileSettings",
    "ProfileAccess",
    "ProfileRefusal",
    "ProviderFileError",
    "control_plane_problem",
    "name_conflict_condition",
    "parse_provider_file",
    "profile_access",
    "profile_identity",
    "profile_kubeconfig",
]

# The reason of a profile jobrelay will not connect: its Event's and its worker's condition's.
CLUSTER_PROFILE_REFUSED = "ClusterProfileRefused"
# The profile's own health condition (cluster-inventory-api's ClusterConditionControlPlaneHealthy).
CONTROL_PLANE_HEALTHY = "ControlPlaneHealthy"
# The Connected reason of a profile worker whose profile says its control plane is not healthy.
CONTROL_PLANE_UNHEALTHY = "ControlPlaneUnhealthy"
# The condition a WorkerCluster carries while a selected ClusterProfile has its name.
NAME_CONFLICT_CONDITION = "ClusterProfileConflict"

# KEP-5339's extensions that let a profile add exec args or env: honoured only by a policy in
# the file; jobrelay supports none (a profile's writer would choose what runs here).
_POLICIES = ("profileSourcedCLIArgsPolicy", "profileSourcedEnvVarsPolicy")
_IGNORE = ("", "Ignore")
# The exec API version client-go's plugins speak today; lightkube reads the same ExecCredential
# (status.token) under v1beta1, and passes the plugin no KUBERNETES_EXEC_INFO under either.
_EXEC_V1 = "client.authentication.k8s.io/v1"
_EXEC_AS = "client.authentication.k8s.io/v1beta1"
# What an exec plugin of the file becomes in a kubeconfig (the rest is client-go's only).
_EXEC_FIELDS = ("apiVersion", "command", "args", "env", "installHint")


class ProviderFileError(ValueError):
    """The access-provider file cannot be used; one line says where and why."""


@dataclass(frozen=True)
class AccessProviderConfig:
    """One provider of the file: its name, and the exec plugin that gets its credentials."""

    name: str
    exec_config: Mapping[str, Any]


@dataclass(frozen=True)
class ClusterProfileSettings:
    """Which ClusterProfiles are workers (``--cluster-profiles``, ``--cluster-profile-selector``)
    and the providers of ``--cluster-profile-access-providers``, read once at start."""

    namespace: str
    selector: str = ""
    providers: tuple[AccessProviderConfig, ...] = ()
    provider_file: str = ""


@dataclass(frozen=True)
class ProfileAccess:
    """How to reach a profile's cluster: the provider chosen, its cluster, the file's plugin."""

    provider: str
    cluster: Mapping[str, Any]
    exec_config: Mapping[str, Any]


@dataclass(frozen=True)
class ProfileRefusal:
    """Why a profile is not connected (reason ``ClusterProfileRefused``)."""

    message: str
    reason: str = CLUSTER_PROFILE_REFUSED


def parse_provider_file(text: str, where: str) -> tuple[AccessProviderConfig, ...]:
    """The providers of an access-provider file (JSON, as the library reads it; YAML too),
    each exec plugin checked as a kubeconfig's is; ProviderFileError naming ``where``."""
    problem = credentials.nesting_problem(text.encode())
    if problem:
        raise ProviderFileError(f"{where}: {problem}")
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ProviderFileError(f"{where}: {yaml_problem(error)}") from None
    if not isinstance(loaded, Mapping) or not isinstance(loaded.get("providers"), list):
        raise ProviderFileError(f'{where}: not an access-provider file ({{"providers": [...]}})')
    providers: list[AccessProviderConfig] = []
    for index, entry in enumerate(loaded["providers"]):
        here = f"{where}: providers[{index}]"
        if not isinstance(entry, Mapping):
            raise ProviderFileError(f"{here} is not a mapping with name and execConfig")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ProviderFileError(f"{here} has no name")
        here = f"{where}: {credentials.entry_label('providers', index, name)}"
        if any(p.name == name for p in providers):
            raise ProviderFileError(f"{here}: a second provider of that name")
        for policy in _POLICIES:
            if entry.get(policy, "") not in _IGNORE:
                raise ProviderFileError(
                    f"{here}: {policy} other than Ignore is not supported (a profile's "
                    "writer would choose the arguments or environment of the plugin)"
                )
        plugin = entry.get("execConfig")
        if not isinstance(plugin, Mapping):
            raise ProviderFileError(f"{here} has no execConfig")
        exec_config = _exec_for_kubeconfig(plugin)
        try:
            credentials.check_kubeconfig(_kubeconfig(name, {"server": "https://x"}, exec_config),
                                         allow_exec=True)  # fmt: skip
        except credentials.KubeconfigRefused as refused:
            raise ProviderFileError(f"{here}: execConfig: {refused.problem}") from None
        providers.append(AccessProviderConfig(name, exec_config))
    return tuple(providers)


def _exec_for_kubeconfig(plugin: Mapping[str, Any]) -> dict[str, Any]:
    exec_config = {k: plugin[k] for k in _EXEC_FIELDS if plugin.get(k) is not None}
    if exec_config.get("apiVersion") == _EXEC_V1:
        exec_config["apiVersion"] = _EXEC_AS
    return exec_config


def _offered(profile: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The profile's access providers by name (the deprecated list first, as the library)."""
    status = profile.get("status")
    status = status if isinstance(status, Mapping) else {}
    offered: dict[str, Mapping[str, Any]] = {}
    for field in ("credentialProviders", "accessProviders"):
        entries = status.get(field)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                offered[entry["name"]] = entry
    return offered


# A profile is written by its cluster manager, not jobrelay: what it says is bounded
# before it reaches a status, an Event or a log line.
_NAMES_SHOWN = 10
_SAID_LIMIT = 300


def _names(names: Iterable[str]) -> str:
    shown = [n for n in names if credentials.entry_label("", 0, n) != "[0]"]  # printable only
    more = len(shown) - _NAMES_SHOWN
    listed = ", ".join(shown[:_NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")
    return listed or "none"


def profile_access(
    profile: Mapping[str, Any], providers: Sequence[AccessProviderConfig]
) -> ProfileAccess | ProfileRefusal:
    """How jobrelay reaches the profile's cluster, or why it will not."""
    offered = _offered(profile)
    if not offered:
        return ProfileRefusal("the ClusterProfile lists no status.accessProviders")
    for provider in providers:
        entry = offered.get(provider.name)
        if entry is None:
            continue
        cluster = entry.get("cluster")
        if not isinstance(cluster, Mapping) or not cluster.get("server"):
            return ProfileRefusal(f"its access provider {provider.name!r} names no cluster server")
        # Extensions carry what only client-go's exec plugins read (KEP-5339's reserved keys).
        kept = {k: v for k, v in cluster.items() if k != "extensions"}
        return ProfileAccess(provider.name, kept, provider.exec_config)
    return ProfileRefusal(
        f"its access providers ({_names(offered)}) are none of the access-provider file's "
        f"({_names(p.name for p in providers)}): exec plugins run only for providers the "
        "file names"
    )


def _kubeconfig(
    provider: str, cluster: Mapping[str, Any], exec_config: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": provider, "cluster": dict(cluster)}],
        "users": [{"name": provider, "user": {"exec": dict(exec_config)}}],
        "contexts": [{"name": provider, "context": {"cluster": provider, "user": provider}}],
        "current-context": provider,
    }


def profile_kubeconfig(access: ProfileAccess) -> dict[str, Any]:
    """The kubeconfig of a profile's worker, once the Secret rules accept it (else
    KubeconfigRefused: e.g. a profile's cluster with ``insecure-skip-tls-verify: true``)."""
    config = _kubeconfig(access.provider, access.cluster, access.exec_config)
    credentials.check_kubeconfig(config, allow_exec=True)
    return config


def profile_identity(access: ProfileAccess | ProfileRefusal) -> tuple[str, ...]:
    """What a profile worker's connection is built from: a change reconnects it (its
    conditions and properties, rewritten often by its manager, do not)."""
    if isinstance(access, ProfileRefusal):
        return ("refused", access.message)
    return (
        "profile",
        access.provider,
        json.dumps(access.cluster, sort_keys=True, default=str),
        json.dumps(access.exec_config, sort_keys=True),
    )


def control_plane_problem(profile: Mapping[str, Any]) -> str | None:
    """Why the profile's own conditions say its cluster is not healthy (None: they do not
    say so; True, Unknown and absent leave it to jobrelay's probe)."""
    status = profile.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if not isinstance(condition, Mapping) or condition.get("type") != CONTROL_PLANE_HEALTHY:
            continue
        if condition.get("status") != "False":
            return None
        said = ": ".join(str(condition[k]) for k in ("reason", "message") if condition.get(k))
        said = " ".join(said.split())[:_SAID_LIMIT]
        return f"its ClusterProfile says {CONTROL_PLANE_HEALTHY}=False" + (
            f" ({said})" if said else ""
        )
    return None


def name_conflict_condition(namespace: str, name: str) -> dict[str, str]:
    """The condition of a WorkerCluster whose name a selected ClusterProfile also has:
    the WorkerCluster stays the worker, the profile is refused."""
    return {
        "type": NAME_CONFLICT_CONDITION,
        "status": "True",
        "reason": "NameInUse",
        "message": (
            f"ClusterProfile {namespace}/{name} is selected as a worker of the same name: "
            "this WorkerCluster stays the worker and the profile is refused"
        ),
    }
