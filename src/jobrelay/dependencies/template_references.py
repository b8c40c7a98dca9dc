"""What a workload's pod templates name outside themselves: the ConfigMaps, Secrets and
ServiceAccount its pods need in their namespace (copied to the worker before a mirror is
created), and the PersistentVolumeClaims whose data decides where it may run.

Pure: templates in, names out. Every place a pod spec can name a ConfigMap or a Secret
is read: volumes (``configMap``, ``secret``, ``projected`` sources, and the
``secretRef`` of ``cephfs``, ``cinder``, ``flexVolume``, ``iscsi``, ``rbd``, ``scaleIO``
and ``storageos`` volumes, ``csi``'s ``nodePublishSecretRef``, ``azureFile``'s
``secretName``: the walk of Kubernetes' own ``VisitPodSecretNames``), ``envFrom`` and ``env[].valueFrom`` of app, init and ephemeral
containers, ``imagePullSecrets``, and ``serviceAccountName`` (or the deprecated
``serviceAccount`` it defaults from). What every namespace
already has on a worker (its ``default`` ServiceAccount, the ``kube-root-ca.crt``
ConfigMap the apiserver publishes) is not named: copying it would overwrite the
worker's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from jobrelay.vocabulary.json_types import JsonObj

DependencyKind = Literal["configmap", "secret", "serviceaccount"]

# Objects a worker namespace always has, made by the worker itself.
WORKER_PROVIDED: frozenset[tuple[DependencyKind, str]] = frozenset(
    {("configmap", "kube-root-ca.crt"), ("serviceaccount", "default")}
)
# Volume sources that name a Secret under ``secretRef`` (credentials of a storage driver);
# ``csi`` has none: its Secret is ``nodePublishSecretRef``.
_SECRET_REF_VOLUMES = ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


@dataclass(frozen=True, slots=True, order=True)
class Dependency:
    """One object a workload's pods need in their namespace: ``configmap/settings``.

    ``optional``: every reference to it says ``optional: true`` (its pods start without
    it); one required reference makes it required.
    """

    kind: DependencyKind
    name: str
    optional: bool = False

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def _dict(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _named(kind: DependencyKind, name: Any, optional: Any = False) -> Iterator[Dependency]:
    if isinstance(name, str) and name and (kind, name) not in WORKER_PROVIDED:
        yield Dependency(kind, name, optional is True)


def _volume_references(volume: JsonObj) -> Iterator[Dependency]:
    config_map = _dict(volume.get("configMap"))
    if config_map:
        yield from _named("configmap", config_map.get("name"), config_map.get("optional"))
    secret = _dict(volume.get("secret"))
    if secret:
        yield from _named("secret", secret.get("secretName"), secret.get("optional"))
    for source in _list(_dict(volume.get("projected")).get("sources")):
        source = _dict(source)
        projected_map = _dict(source.get("configMap"))
        if projected_map:
            yield from _named("configmap", projected_map.get("name"), projected_map.get("optional"))
        projected_secret = _dict(source.get("secret"))
        if projected_secret:
            yield from _named(
                "secret", projected_secret.get("name"), projected_secret.get("optional")
            )
    for driver in _SECRET_REF_VOLUMES:
        ref = _dict(_dict(volume.get(driver)).get("secretRef"))
        if ref:
            yield from _named("secret", ref.get("name"))
    ref = _dict(_dict(volume.get("csi")).get("nodePublishSecretRef"))
    if ref:
        yield from _named("secret", ref.get("name"))
    azure_file = _dict(volume.get("azureFile"))
    if azure_file:
        yield from _named("secret", azure_file.get("secretName"))


def _container_references(container: JsonObj) -> Iterator[Dependency]:
    for source in _list(container.get("envFrom")):
        source = _dict(source)
        ref = _dict(source.get("configMapRef"))
        if ref:
            yield from _named("configmap", ref.get("name"), ref.get("optional"))
        ref = _dict(source.get("secretRef"))
        if ref:
            yield from _named("secret", ref.get("name"), ref.get("optional"))
    for variable in _list(container.get("env")):
        value_from = _dict(_dict(variable).get("valueFrom"))
        ref = _dict(value_from.get("configMapKeyRef"))
        if ref:
            yield from _named("configmap", ref.get("name"), ref.get("optional"))
        ref = _dict(value_from.get("secretKeyRef"))
        if ref:
            yield from _named("secret", ref.get("name"), ref.get("optional"))


def _pod_spec_references(pod_spec: JsonObj) -> Iterator[Dependency]:
    for volume in _list(pod_spec.get("volumes")):
        yield from _volume_references(_dict(volume))
    for field in _CONTAINER_LISTS:
        for container in _list(pod_spec.get(field)):
            yield from _container_references(_dict(container))
    # The kubelet pulls without a pull Secret it cannot find (a public image still runs):
    # copied when it exists, never a reason to hold the workload.
    for pull_secret in _list(pod_spec.get("imagePullSecrets")):
        yield from _named("secret", _dict(pull_secret).get("name"), True)
    # serviceAccount is the deprecated alias the apiserver still fills from it.
    account = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    yield from _named("serviceaccount", account)


def dependencies(templates: Iterable[JsonObj]) -> tuple[Dependency, ...]:
    """The objects the pods of these templates (``{metadata, spec}``) need, each once,
    sorted (kind, name); required when any reference requires it."""
    found: dict[tuple[DependencyKind, str], bool] = {}
    for template in templates:
        for reference in _pod_spec_references(_dict(_dict(template).get("spec"))):
            key = (reference.kind, reference.name)
            found[key] = found.get(key, True) and reference.optional
    return tuple(
        Dependency(kind, name, optional) for (kind, name), optional in sorted(found.items())
    )


def claim_names(templates: Iterable[JsonObj]) -> tuple[str, ...]:
    """The PersistentVolumeClaims the pods of these templates mount by name, each once,
    sorted (ephemeral volumes are made with each pod: they name none)."""
    names = set()
    for template in templates:
        for volume in _list(_dict(_dict(template).get("spec")).get("volumes")):
            claim = _dict(_dict(volume).get("persistentVolumeClaim")).get("claimName")
            if isinstance(claim, str) and claim:
                names.add(claim)
    return tuple(sorted(names))
