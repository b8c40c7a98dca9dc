"""Which kinds a `jobrelay get` (or `describe`, `top`) TYPE names: kubectl's names of
Job and JobSet, Kind.version.group, and through the controller's Lease and
discovery, `all` and any other kind the controller runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from jobrelay.cli.types_rules import BUILT_IN, KindNames, TypeRequest, match_type
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED, kinds_from_names, parse_kind_name

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

__all__ = [
    "JOBSET_KIND",
    "JOB_KIND",
    "RESOURCE_TYPES",
    "known_kinds",
    "resolve",
    "workload_kinds",
]

JOB_KIND = DEDICATED["Job.v1.batch"]
JOBSET_KIND = DEDICATED["JobSet.v1alpha2.jobset.x-k8s.io"]

# Resource types as kubectl accepts them: plural, singular, plural.group.
RESOURCE_TYPES: dict[str, tuple[WorkloadKind, ...]] = {
    "all": (JOB_KIND, JOBSET_KIND),
    **{alias: (JOB_KIND,) for alias in ("jobs", "job", "jobs.batch", "job.batch")},
    **{
        alias: (JOBSET_KIND,)
        for alias in ("jobsets", "jobset", "jobsets.jobset.x-k8s.io", "jobset.jobset.x-k8s.io")
    },
}


async def known_kinds(client: ApiClient, namespace: str | None, lease_name: str) -> list[KindNames]:
    """The kinds the controller runs (its leader records them on its Lease; Job and JobSet
    when no Lease says), each with the names discovery gives it (plural, short names).
    ``namespace``: the controller's, None to find it (controller_namespace)."""
    from datetime import UTC, datetime

    from jobrelay.cli.controller_namespace import locate_controller
    from jobrelay.cli.version import NoLease, read_leader
    from jobrelay.kinds.managed_by_claims import parse_lease_entry
    from jobrelay.kube.errors import ApiError

    try:
        if namespace is None:
            namespace = (
                await locate_controller(client, None, lease_name, datetime.now(UTC))
            ).namespace
        recorded = (await read_leader(client, namespace, lease_name)).kinds or BUILT_IN
    except (NoLease, ApiError):  # no controller here, or Leases not readable by this user
        recorded = BUILT_IN
    known = []
    for claim in (parse_lease_entry(text) for text in recorded):
        if claim is None:  # whoever may update the Lease wrote it: junk is skipped
            continue
        kind, version, group = parse_kind_name(claim.name)
        try:
            served = await client.discover(group, version)
        except ApiError:
            served = []
        entry = next((r for r in served if r.get("kind") == kind and "/" not in r["name"]), None)
        known.append(
            KindNames.of(claim.name, entry, managed_by=claim.managed_by, field=claim.field)
        )
    return known


def workload_kinds(found: list[KindNames]) -> tuple[WorkloadKind, ...]:
    plurals = {names.name: names.plural for names in found}
    fields = {names.name: names.field for names in found if names.field}
    return tuple(kinds_from_names([names.name for names in found], plurals=plurals, fields=fields))


async def resolve(
    client: ApiClient,
    requests: list[TypeRequest],
    namespace: str | None,
    lease_name: str,
    claims: dict[str, str] | None = None,
) -> list[tuple[TypeRequest, tuple[WorkloadKind, ...]]]:
    """Each request's kinds: kubectl's names of Job and JobSet and Kind.version.group at
    once; ``all`` and any other name through the controller's kinds and discovery.
    ``claims`` receives the managedBy value the controller's Lease says each kind claims."""
    resolved = []
    known: list[KindNames] | None = None
    for request in requests:
        kinds = RESOURCE_TYPES.get(request.type.lower()) if request.type != "all" else None
        if kinds is None:
            if known is None:
                known = await known_kinds(client, namespace, lease_name)
                if claims is not None:
                    claims.update({k.name: k.managed_by for k in known if k.managed_by})
            found = match_type(request.type, known)
            if not found:
                raise click.UsageError(
                    f"the server doesn't have a resource type {request.type!r}: name one of "
                    f"{', '.join(k.plural for k in known)}, all, or Kind.version.group",
                )
            kinds = workload_kinds(found)
        if request.names and len(kinds) > 1:
            raise click.UsageError("name a single resource type (jobs or jobsets) with NAMEs")
        resolved.append((request, kinds))
    return resolved
