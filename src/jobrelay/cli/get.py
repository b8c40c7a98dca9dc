"""`jobrelay get [jobs|jobsets|all|Kind.version.group] [NAME...]`: managed workloads with
kubectl's habits (`jobrelay jobs` is the same command).

Columns, states and reasons come from :mod:`jobrelay.cli.workloads` (pure); this
module lists, watches and prints. The API client is imported when it lists, so that
`jobrelay get --help` starts at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

from jobrelay.cli import workloads
from jobrelay.cli.common import (
    NotFound,
    _completions,
    kubeconfig_namespace,
    manager_client,
    manager_options,
    namespace_options,
    run_command,
)
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED, KindError, kinds_from_names
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

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
OUTPUTS = ("wide", "json", "yaml", "name")
TYPES_METAVAR = "[jobs|jobsets|all|Kind.version.group]"


def kinds_of(resource_type: str) -> tuple[WorkloadKind, ...]:
    """The kinds a resource type names: kubectl's names of Job and JobSet, ``all`` (both), or
    any other workload kind as ``Kind.version.group`` (``RayJob.v1.ray.io``)."""
    kinds = RESOURCE_TYPES.get(resource_type.lower())
    if kinds is not None:
        return kinds
    try:
        return tuple(kinds_from_names([resource_type]))
    except KindError as error:
        raise click.BadParameter(
            f"{resource_type!r}: one of jobs, jobsets, all, or Kind.version.group ({error})",
            param_hint=TYPES_METAVAR,
        ) from None


_WATCH_TIMEOUT_SECONDS = 300  # the apiserver ends a watch after this; it is opened again


def resource_name(kind: WorkloadKind, name: str) -> str:
    """``job.batch/NAME`` as ``kubectl get -o name`` prints it."""
    group = f".{kind.ref.group}" if kind.ref.group else ""
    return f"{kind.ref.kind.lower()}{group}/{name}"


def as_list(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``v1 List`` of objects, as kubectl prints several for ``-o json|yaml``."""
    return {
        "apiVersion": "v1",
        "items": list(items),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }


def dump(document: Any, output: str) -> str:
    import msgspec
    import yaml

    if output == "json":
        return msgspec.json.format(msgspec.json.encode(document), indent=4).decode()
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False).rstrip("\n")


@dataclass(frozen=True)
class Query:
    kinds: tuple[WorkloadKind, ...]
    namespace: str | None  # None: every namespace
    selector: str | None
    names: tuple[str, ...]
    controller_name: str
    explicit: bool  # the types were named (not `all`): a kind not served is an error

    def wanted(self, obj: Mapping[str, Any]) -> bool:
        if self.names:
            return Meta(obj).name in self.names
        return (obj.get("spec") or {}).get("managedBy") == self.controller_name


@dataclass
class Listed:
    found: list[tuple[WorkloadKind, dict[str, Any]]] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # kind name -> resourceVersion
    missing: list[tuple[WorkloadKind, str]] = field(default_factory=list)
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


async def fetch(client: ApiClient, query: Query) -> Listed:
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
            if error.is_not_found:
                raise click.ClickException(
                    f'the management cluster does not serve "{kind.ref.plural}" '
                    f"({kind.ref.name}): is its CRD installed?"
                ) from error
            raise
        listed.versions[kind.name] = page.resource_version
        listed.found.extend((kind, obj) for obj in page.items if query.wanted(obj))
    return listed


class Printer:
    """Prints workloads in one output format; in a watch, only rows that changed."""

    def __init__(self, output: str | None, *, now: Callable[[], datetime]) -> None:
        self.output = output
        self.now = now
        # The latest Warning about each object by UID (shown when it has no reason of its own).
        self.warnings: Mapping[str, str] = {}
        self._widths: list[int] = []
        self._shown: dict[tuple[str, str, str], object] = {}

    def first(self, found: list[tuple[WorkloadKind, dict[str, Any]]], *, single: bool) -> None:
        rows = [self._row(kind, obj) for kind, obj in found]
        for r, (_, obj) in zip(rows, found, strict=True):  # what a watch compares with
            self._shown[(r.kind, r.namespace, r.name)] = self._fingerprint(r, obj)
        if self.output in ("json", "yaml"):
            objects = [obj for _, obj in found]
            document = objects[0] if single and len(objects) == 1 else as_list(objects)
            click.echo(dump(document, self.output))
        elif self.output == "name":
            for kind, obj in found:
                click.echo(resource_name(kind, obj["metadata"]["name"]))
        else:
            wide = self.output == "wide"
            header = workloads.state_header(wide=wide)
            lines = [header, *(workloads.state_line(r, wide=wide) for r in rows)]
            if rows:  # else the header comes with the first row a watch prints
                self._widths = workloads.column_widths(lines)
                for line in lines:
                    click.echo(workloads.aligned(line, self._widths))
        sys.stdout.flush()  # a watch follows: what was listed shows at once through a pipe

    def _row(self, kind: WorkloadKind, obj: Mapping[str, Any]) -> workloads.Row:
        warning = self.warnings.get(Meta(obj).uid, "")
        return workloads.row(kind, obj, self.now(), warning=warning)

    def _fingerprint(self, r: workloads.Row, obj: Mapping[str, Any]) -> object:
        """What must differ for a watch to print the object again: what the table shows of
        it (ages aside); for json and yaml, anything but its resourceVersion."""
        if self.output in ("json", "yaml"):
            import msgspec

            metadata = {
                k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields")
            }  # fmt: skip
            return msgspec.json.encode({**obj, "metadata": metadata}, order="sorted")
        if self.output == "name":
            return r.identity()
        return r.identity(wide=self.output == "wide")

    def changed(self, kind: WorkloadKind, obj: dict[str, Any]) -> None:
        """A watch event's object: printed when what the table shows of it changed."""
        r = self._row(kind, obj)
        key = (r.kind, r.namespace, r.name)
        fingerprint = self._fingerprint(r, obj)
        if self._shown.get(key) == fingerprint:
            return
        self._shown[key] = fingerprint
        if self.output in ("json", "yaml"):
            click.echo(dump(obj, self.output))
            if self.output == "yaml":
                click.echo("---")
        elif self.output == "name":
            click.echo(resource_name(kind, r.name))
        else:
            wide = self.output == "wide"
            line = workloads.state_line(r, wide=wide)
            if not self._widths:  # nothing was listed: the header comes with the first row
                header = workloads.state_header(wide=wide)
                self._widths = workloads.column_widths([header, line])
                click.echo(workloads.aligned(header, self._widths))
            click.echo(workloads.aligned(line, self._widths))
        sys.stdout.flush()


async def follow(client: ApiClient, query: Query, listed: Listed, printer: Printer) -> None:
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
                    if query.wanted(obj):
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
                        if event.type in ("ADDED", "MODIFIED") and query.wanted(obj):
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


def complete_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of NAME: the managed workloads of the type typed before it."""
    params = ctx.params
    kinds = RESOURCE_TYPES.get(str(params.get("resource_type") or "jobs"), (JOB_KIND,))
    namespace = None if params.get("all_namespaces") else params.get("namespace")
    if namespace is None and not params.get("all_namespaces"):
        namespace = kubeconfig_namespace(params.get("kubeconfig"), params.get("context"))

    async def names() -> list[str]:
        query = Query(kinds, namespace, None, (), DEFAULT_CONTROLLER_NAME, explicit=False)
        async with manager_client(params.get("kubeconfig"), params.get("context")) as client:
            listed = await fetch(client, query)
        return [obj["metadata"]["name"] for _, obj in listed.found]

    return [CompletionItem(name) for name in _completions(names) if name.startswith(incomplete)]


def complete_types(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    return [
        CompletionItem(name) for name in ("jobs", "jobsets", "all") if name.startswith(incomplete)
    ]


@click.command()
@click.argument("resource_type", metavar=TYPES_METAVAR, required=False, default="jobs",
                shell_complete=complete_types)  # fmt: skip
@click.argument("names", nargs=-1, shell_complete=complete_names)
@namespace_options
@click.option("-l", "--selector", default=None, help="Label selector (kubectl -l syntax).")
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default=None,
              help="wide: more columns; json|yaml: a List of the objects as the apiserver "
                   "returns them; name: kind.group/NAME.")  # fmt: skip
@click.option(
    "-w", "--watch", is_flag=True, help="After listing, print every change (Ctrl-C stops)."
)
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              help="List workloads with this spec.managedBy.")  # fmt: skip
@manager_options
def get(
    resource_type: str,
    names: tuple[str, ...],
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    output: str | None,
    watch: bool,
    controller_name: str,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """List managed workloads: cluster, state (Held, Pending, Dispatched, Running, Blocked,
    Complete, Failed, Suspended) and why, completions, age and duration.

    REASON is why it waits or how it ended, else the latest Warning Event about it.
    Named workloads are shown whoever manages them; missing ones exit 3. `jobrelay jobs`
    is the same command.
    """
    kinds = kinds_of(resource_type)
    if names and len(kinds) > 1:
        raise click.UsageError("name a single resource type (jobs or jobsets) with NAMEs")
    if all_namespaces and names:
        raise click.UsageError("a resource cannot be retrieved by name across all namespaces")
    if all_namespaces:
        where: str | None = None
    else:
        where = namespace or kubeconfig_namespace(kubeconfig, context)
    query = Query(
        kinds, where, selector, names, controller_name, explicit=resource_type.lower() != "all"
    )
    printer = Printer(output, now=lambda: datetime.now(UTC))

    async def go() -> Listed:
        async with manager_client(kubeconfig, context) as client:
            listed = await fetch(client, query)
            if output in (None, "wide") and listed.found:
                listed.warnings = await latest_warnings(client, where)
                printer.warnings = listed.warnings
            printer.first(listed.found, single=len(names) == 1)
            if not listed.found and not names and not watch and output in (None, "wide"):
                scope = "in any namespace" if where is None else f"in {where} namespace"
                click.echo(f"No resources found {scope}.", err=True)
            if watch:
                await follow(client, query, listed, printer)
            return listed

    listed = run_command(go())
    if listed.missing:
        for kind, name in listed.missing:
            click.echo(
                f"Error from server (NotFound): {kind.ref.plural}.{kind.ref.group or 'core'} "
                f'"{name}" not found',
                err=True,
            )
        raise NotFound(f"{len(listed.missing)} not found")
