"""Where the controller runs, so that no command needs `--namespace` to find it: the
namespace of its leader's Lease (where `clusters add` stores a worker's Secret, where
`get` reads the kinds it runs, where `version` reads its version).

The order, decided by :func:`choose_controller_namespace` (pure):

1. the command's flag (``-n``/``--namespace``, ``--controller-namespace``);
2. ``$JOBRELAY_NAMESPACE``;
3. the namespace of the controller's leader Lease (``jobrelay-relay`` for the default
   controller name), found across namespaces: a fresh one before a stale one, then the
   latest renewed: a chart installed into ``relay-ops`` is found there;
4. the namespace of the Service behind APIService ``v1alpha1.api.jobrelay.dev`` (the
   controller serves it), for a user who may not list Leases across namespaces;
5. ``jobrelay-system`` (the chart's documented namespace).

The reads (:func:`locate_controller`) never fail the command: a refusal or a timeout
moves on to the next source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient
    from jobrelay.kube.election.election_rules import LeaseFreshness

__all__ = [
    "DEFAULT_CONTROLLER_NAMESPACE",
    "NAMESPACE_ENV",
    "ControllerLocation",
    "LeaseSighting",
    "NamespaceSource",
    "choose_controller_namespace",
    "kinds_for_verb",
    "locate_controller",
    "namespace_default_help",
    "recorded_kinds",
]

NAMESPACE_ENV = "JOBRELAY_NAMESPACE"
DEFAULT_CONTROLLER_NAMESPACE = "jobrelay-system"  # the chart's, `jobrelay run --namespace`'s
# Each read is given up past this (then the next source is asked).
_READ_TIMEOUT_SECONDS = 3.0
_KINDS_CHARS = 16 * 1024
_MAX_KINDS = 64


def namespace_default_help() -> str:
    """The ``[default: ...]`` of every flag naming the controller's namespace."""
    return (
        f"the controller's: ${NAMESPACE_ENV}, else the namespace of its leader's Lease, else "
        f"of APIService v1alpha1.api.jobrelay.dev's Service, else {DEFAULT_CONTROLLER_NAMESPACE}"
    )


class NamespaceSource(StrEnum):
    """Where the controller's namespace was found."""

    FLAG = "flag"
    ENVIRONMENT = "environment"
    LEASE = "lease"
    API_SERVICE = "apiservice"
    DEFAULT = "default"


@dataclass(frozen=True)
class LeaseSighting:
    """A controller Lease of the wanted name, found in ``namespace``."""

    namespace: str
    freshness: LeaseFreshness


@dataclass(frozen=True)
class ControllerLocation:
    """The controller's namespace, where it came from, and its Lease when it was read."""

    namespace: str
    source: NamespaceSource
    lease: Mapping[str, Any] | None = None


def choose_controller_namespace(
    flag: str | None,
    environment: str | None,
    sightings: Sequence[LeaseSighting],
    api_service_namespace: str | None,
) -> tuple[str, NamespaceSource]:
    """The controller's namespace (see the module's order). Blank values are not given."""
    if flag:
        return flag, NamespaceSource.FLAG
    if environment and environment.strip():
        return environment.strip(), NamespaceSource.ENVIRONMENT
    if sightings:
        return _best_sighting(sightings).namespace, NamespaceSource.LEASE
    if api_service_namespace:
        return api_service_namespace, NamespaceSource.API_SERVICE
    return DEFAULT_CONTROLLER_NAMESPACE, NamespaceSource.DEFAULT


def _best_sighting(sightings: Sequence[LeaseSighting]) -> LeaseSighting:
    """A fresh Lease (a controller leads there now) before a stale one (a former
    install), then the latest renewed; the namespace's name settles a tie."""

    from jobrelay.kube.election.election_rules import LeaseState

    def rank(sighting: LeaseSighting) -> tuple[bool, float, str]:
        renewed = sighting.freshness.renewed_at
        return (
            sighting.freshness.state is not LeaseState.FRESH,
            -renewed.timestamp() if renewed is not None else float("inf"),
            sighting.namespace,
        )

    return min(sightings, key=rank)


def environment_namespace() -> str | None:
    return os.environ.get(NAMESPACE_ENV) or None


async def locate_controller(
    client: ApiClient, flag: str | None, lease_name: str, now: datetime
) -> ControllerLocation:
    """The controller's namespace for a command given ``flag`` (None: not given); asks the
    manager only when neither the flag nor ``$JOBRELAY_NAMESPACE`` says."""
    from jobrelay.kube.election.election_rules import lease_freshness

    environment = environment_namespace()
    if flag or environment:
        namespace, source = choose_controller_namespace(flag, environment, (), None)
        return ControllerLocation(namespace, source)
    leases = await _leases_named(client, lease_name)
    sightings = [
        LeaseSighting(str(lease["metadata"].get("namespace") or ""), lease_freshness(lease, now))
        for lease in leases
    ]
    sightings = [sighting for sighting in sightings if sighting.namespace]
    service_namespace = None if sightings else await _api_service_namespace(client)
    namespace, source = choose_controller_namespace(None, None, sightings, service_namespace)
    lease = next(
        (lease for lease in leases if lease["metadata"].get("namespace") == namespace), None
    )
    return ControllerLocation(namespace, source, lease)


async def _leases_named(client: ApiClient, lease_name: str) -> list[dict[str, Any]]:
    """Every Lease named ``lease_name``, in any namespace; [] when they cannot be listed."""
    import asyncio

    from jobrelay.kube.resources import LEASES

    try:
        async with asyncio.timeout(_READ_TIMEOUT_SECONDS):
            listed = await client.list(LEASES, field_selector=f"metadata.name={lease_name}")
    except Exception:  # a refusal (403), a timeout: the next source says
        return []
    return [
        lease
        for lease in listed.items
        if isinstance(lease.get("metadata"), dict) and lease["metadata"].get("name") == lease_name
    ]


async def _api_service_namespace(client: ApiClient) -> str | None:
    """The namespace of the Service behind the controller's APIService, when readable."""
    import asyncio

    from jobrelay.kube.resources import API_SERVICES
    from jobrelay.relayapi.registration_rules import API_SERVICE_NAME

    try:
        async with asyncio.timeout(_READ_TIMEOUT_SECONDS):
            api_service = await client.get(API_SERVICES, API_SERVICE_NAME)
    except Exception:  # absent, refused, or slow: the default says
        return None
    service = (api_service.get("spec") or {}).get("service") or {}
    namespace = service.get("namespace") if isinstance(service, dict) else None
    return namespace if isinstance(namespace, str) and namespace else None


def kinds_for_verb(
    given: Sequence[str], recorded: Sequence[str] | None, lease_ref: str, default: Sequence[str]
) -> tuple[tuple[str, ...], str | None]:
    """The kinds a `clusters` verb works with, and a warning for stderr (or None).

    ``--kind`` given: those. Else the kinds the leader records on its Lease (``recorded``,
    its ``jobrelay.dev/kinds`` entries; None: no Lease, or none readable), so that
    `clusters remove` deletes a RayJob fleet's mirrors too; else ``default`` (Job), said.
    """
    if given:
        return tuple(given), None
    names = tuple(dict.fromkeys(claim.name for claim in map(_lease_entry, recorded or ()) if claim))
    if names:
        return names, None
    shown = ", ".join(default)
    if recorded is None:
        why = f"no jobrelay controller has led this manager (no readable Lease {lease_ref})"
    else:
        why = f"the controller's Lease {lease_ref} records no kinds (an older jobrelay)"
    return tuple(default), (
        f"warning: {why}, so the kinds it runs are unknown: using --kind {shown}; pass --kind "
        "(repeatable) for every kind the controller runs"
    )


def _lease_entry(text: str) -> Any:
    from jobrelay.kinds.managed_by_claims import parse_lease_entry

    return parse_lease_entry(text)


async def recorded_kinds(
    client: ApiClient, located: ControllerLocation, lease_name: str
) -> tuple[str, ...] | None:
    """The ``jobrelay.dev/kinds`` entries of the controller's Lease (as read by
    :func:`locate_controller`, else read here); None when it has none to read."""
    from jobrelay.kube.resources import LEASES
    from jobrelay.vocabulary.names import KINDS_ANNOTATION

    lease = located.lease
    if lease is None:
        try:
            lease = await client.get(LEASES, lease_name, namespace=located.namespace)
        except Exception:  # absent (404), refused: the caller says it does not know
            return None
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    # Whoever may update the Lease writes it: bounded, as `jobrelay version` reads it.
    text = str(annotations.get(KINDS_ANNOTATION) or "")[:_KINDS_CHARS]
    return tuple(entry for entry in text.split(",") if entry)[:_MAX_KINDS]
