"""Which kinds this controller serves, and under which managedBy value: each configured
kind checked against the manager's discovery (its plural; a kind it does not serve stops
the start), against its CRD (a managedBy value it refuses stops the start) and against
the controllers already there (Kueue's MultiKueue owns kueue.x-k8s.io/multikueue)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobrelay.controller.options import ControllerOptions
from jobrelay.kinds import KindError, WorkloadKind, kinds_from_names
from jobrelay.kinds.base import MANAGED_BY_FIELDS
from jobrelay.kinds.catalog import parse_kind_name
from jobrelay.kinds.managed_by_claims import (
    KUEUE_GROUP,
    MULTIKUEUE,
    claim_problem,
    field_problem,
    multikueue_problem,
)
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.interning import share_object


class ConfigurationError(RuntimeError):
    """The controller cannot start as configured; the message says what to do."""


def managed_by(kind: WorkloadKind, value: str) -> Callable[[dict[str, Any]], Any]:
    """An informer transform that keeps only the objects whose managedBy (at the kind's
    field) is the value the kind claims, slimmed, their sub-trees shared with the other
    cached objects' (a backlog made from few templates keeps each once)."""

    def transform(obj: dict[str, Any]) -> dict[str, Any] | None:
        if kind.managed_by(obj) != value:
            return None
        return share_object(kind.slim_local(obj))

    return transform


async def resolve_kinds(manager: ApiClient, options: ControllerOptions) -> list[WorkloadKind]:
    """The configured kinds, each checked against what the management cluster serves.

    Plurals come from discovery, so a CRD with an irregular plural works; a
    kind the manager does not serve stops the start with a message saying so.
    """
    plurals: dict[str, str] = {}
    for name in options.kinds.names:
        try:
            kind, version, group = parse_kind_name(name)
        except KindError as error:
            raise ConfigurationError(str(error)) from error
        try:
            served = await manager.discover(group, version)
        except ApiError as error:
            if error.is_not_found:
                raise ConfigurationError(
                    f"--kind {name}: the management cluster does not serve "
                    f"{group or 'core'}/{version}: install the CRD of {kind} first"
                ) from error
            raise
        match = next((r for r in served if r.get("kind") == kind and "/" not in r["name"]), None)
        if match is None:
            raise ConfigurationError(
                f"--kind {name}: the management cluster serves {group}/{version} but no kind "
                f"{kind} in it (it has: {', '.join(sorted({str(r.get('kind')) for r in served}))})"
            )
        if not match.get("namespaced", True):
            raise ConfigurationError(f"--kind {name}: cluster-scoped kinds cannot be dispatched")
        plurals[name] = str(match["name"])
    try:
        kinds = kinds_from_names(
            options.kinds.names,
            finished_conditions=options.kinds.finished_conditions,
            plurals=plurals,
            fields={n: MANAGED_BY_FIELDS[f] for n, f in options.kinds.managed_by_fields},
        )
    except (KindError, ValueError) as error:
        raise ConfigurationError(str(error)) from error
    await _check_claims(manager, options, kinds)
    return kinds


async def _check_claims(
    manager: ApiClient, options: ControllerOptions, kinds: list[WorkloadKind]
) -> None:
    """Each kind's managedBy value is one its CRD accepts and no other controller on the
    manager serves (Kueue's MultiKueue owns ``kueue.x-k8s.io/multikueue``)."""
    for name, place in options.kinds.managed_by_fields:
        kind = next((k for k in kinds if k.name == name), None)
        if kind is None:
            raise ConfigurationError(
                f"--managed-by-field {name}={place}: name the kind with --kind too"
            )
        if problem := field_problem(kind, place):
            raise ConfigurationError(problem)
    claiming = []
    for kind in kinds:
        value = options.kinds.claimed(kind.name, options.controller_name)
        if problem := claim_problem(kind, value):
            raise ConfigurationError(problem)
        if value == MULTIKUEUE:
            claiming.append(kind.name)
    if not claiming:
        return
    served: set[str] = set()
    for version in await manager.group_versions(KUEUE_GROUP):
        try:
            resources = await manager.discover(KUEUE_GROUP, version)
        except ApiError as error:
            if not error.is_not_found:
                raise
            # Listed by the group but not served yet (a CRD being installed or removed):
            # nothing of it is served at this moment.
            resources = []
        served |= {str(r.get("kind")) for r in resources}
    if problem := multikueue_problem(claiming, served):
        raise ConfigurationError(problem)
