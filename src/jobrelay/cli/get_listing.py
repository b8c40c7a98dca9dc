"""What `jobrelay get` lists and watches: the query (kinds, namespace, selector, names,
and whose workloads), the workloads found, the latest Warning about each, and a
watch from where the list left off.

The API client's modules are imported when it lists, so that `jobrelay get --help`
starts at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from jobrelay.cli import workloads
from jobrelay.cli.get_printer import Printer
from jobrelay.kinds.base import WorkloadKind
from jobrelay.vocabulary.meta import Meta

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

__all__ = ["Listed", "WorkloadQuery", "fetch", "follow", "latest_warnings"]

_WATCH_TIMEOUT_SECONDS = 300  # the apiserver ends a watch after this; it is opened again


@dataclass(frozen=True)
class WorkloadQuery:
    kinds: tuple[WorkloadKind, ...]
    namespace: str | None  # None: every namespace
    selector: str | None
    names: tuple[str, ...]
    controller_name: str
    explicit: bool  # the types were named (not `all`): a kind not served is an error
    # Kind.version.group -> the managedBy value the controller claims for it (its Lease
    # says; a kind not named claims controller_name).
    claims: Mapping[str, str] = field(default_factory=dict)

    def wanted(self, obj: Mapping[str, Any], kind: WorkloadKind) -> bool:
        if self.names:
            return Meta(obj).name in self.names
        value = self.claims.get(kind.name) or self.controller_name
        return kind.managed_by(dict(obj)) == value


@dataclass
class Listed:
    found: list[tuple[WorkloadKind, dict[str, Any]]] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # kind name -> resourceVersion
    missing: list[tuple[WorkloadKind, str]] = field(default_factory=list)
    # Kinds `all` (or `top`) would list but the user may not: left out, and said so.
    refused: list[WorkloadKind] = field(default_factory=list)
    # The latest Warning about each object, by UID: the REASON of those that have none.
    warnings: dict[str, str] = field(default_factory=dict)


async def latest_warnings(client: ApiClient, namespace: str | None) -> dict[str, str]:
    """The latest Warning Event about each object (``Reason: message``), by its UID; none
    when Events cannot be read (the table still shows)."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import EVENTS

    try:
        listed = await client.list(EVENTS, namespace=namespace, field_selector="type=Warning")
    except ApiError:
        return {}
    return workloads.latest_warnings(listed.items)


async def fetch(client: ApiClient, query: WorkloadQuery) -> Listed:
    """The workloads the query names (every managed one without names), per kind in order."""
    from jobrelay.kube.errors import ApiError

    listed = Listed()
    for kind in query.kinds:
        resource = kind.ref
        if query.names:
            for name in query.names:
                try:
                    obj = await client.get(resource, name, namespace=query.namespace)
                except ApiError as error:
                    if not error.is_not_found:
                        raise
                    listed.missing.append((kind, name))
                    continue
                obj.setdefault("apiVersion", resource.api_version)
                obj.setdefault("kind", resource.kind)
                listed.found.append((kind, obj))
            continue
        try:
            page = await client.list(
                resource, namespace=query.namespace, label_selector=query.selector
            )
        except ApiError as error:
            if error.is_not_found and not query.explicit:
                continue  # a kind this manager does not serve, asked for by `all`
            if error.code == 403 and not query.explicit:
                listed.refused.append(kind)  # a tenant may read Jobs and not JobSets
                continue
            if error.is_not_found:
                raise click.ClickException(
                    f'the management cluster does not serve "{kind.ref.plural}" '
                    f"({kind.ref.name}): is its CRD installed?"
                ) from error
            raise
        listed.versions[kind.name] = page.resource_version
        listed.found.extend((kind, obj) for obj in page.items if query.wanted(obj, kind))
    return listed


async def follow(client: ApiClient, query: WorkloadQuery, listed: Listed, printer: Printer) -> None:
    """Watch every kind from where the list left off, printing what changes (like
    ``kubectl get -w``), until interrupted. A watch the apiserver ends is opened again;
    an expired resourceVersion (410) lists again."""
    import asyncio

    from jobrelay.kube.errors import ApiError

    async def one(kind: WorkloadKind) -> None:
        resource = kind.ref
        version = listed.versions.get(kind.name)
        field_selector = f"metadata.name={query.names[0]}" if len(query.names) == 1 else None
        while True:
            if version is None:
                try:
                    page = await client.list(
                        resource, namespace=query.namespace, label_selector=query.selector,
                        field_selector=field_selector,
                    )  # fmt: skip
                except ApiError as error:
                    if error.is_not_found and not query.explicit:
                        return
                    raise
                version = page.resource_version
                for obj in page.items:
                    if query.wanted(obj, kind):
                        printer.changed(kind, obj)
            try:
                async with client.watch(
                    resource, namespace=query.namespace, label_selector=query.selector,
                    field_selector=field_selector, resource_version=version,
                    timeout_seconds=_WATCH_TIMEOUT_SECONDS,
                ) as events:  # fmt: skip
                    async for event in events:
                        obj = dict(event.object)
                        new_version = Meta(obj).resource_version
                        if event.type == "ERROR":
                            version = None  # 410 Gone and its like: list again
                            break
                        if new_version:
                            version = new_version
                        if event.type in ("ADDED", "MODIFIED") and query.wanted(obj, kind):
                            obj.setdefault("apiVersion", resource.api_version)
                            obj.setdefault("kind", resource.kind)
                            printer.changed(kind, obj)
            except ApiError as error:
                if not error.is_gone:
                    raise
                version = None

    async with asyncio.TaskGroup() as group:
        for kind in query.kinds:
            group.create_task(one(kind))
