"""`jobrelay get [jobs|jobsets|all|Kind.version.group] [NAME...]`: managed workloads with
kubectl's habits (`jobrelay jobs` is the same command).

Columns, states and reasons come from :mod:`jobrelay.cli.workloads` (pure); this
module lists, watches and prints. The API client is imported when it lists, so that
`jobrelay get --help` starts at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

from jobrelay.admission.queue_places import QueuePlace
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
from jobrelay.cli.jsonpath_rules import JsonPathError, Template, find
from jobrelay.cli.output_rules import (
    aligned_rows,
    as_list,
    column_cells,
    dump,
    label_cells,
    label_columns,
    label_header,
    parse_output,
    sort_key_path,
    sorted_by,
)
from jobrelay.cli.queue_positions import QueueView, read_places, with_place
from jobrelay.cli.terminal import safe
from jobrelay.cli.types_rules import (
    BUILT_IN,
    ArgumentsError,
    KindNames,
    Request,
    match_type,
    requests_of,
)
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED, kinds_from_names, parse_kind_name
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

DEFAULT_LEASE_NAMESPACE = "jobrelay-system"  # `jobrelay run --namespace`

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
TYPES_METAVAR = "[TYPE[,TYPE...]|TYPE/NAME]"


_WATCH_TIMEOUT_SECONDS = 300  # the apiserver ends a watch after this; it is opened again


def resource_name(kind: WorkloadKind, name: str) -> str:
    """``job.batch/NAME`` as ``kubectl get -o name`` prints it."""
    group = f".{kind.ref.group}" if kind.ref.group else ""
    return f"{kind.ref.kind.lower()}{group}/{name}"


@dataclass(frozen=True)
class Query:
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


class Printer:
    """Prints workloads in one output format; in a watch, only rows that changed."""

    def __init__(
        self,
        output: str | None,
        *,
        now: Callable[[], datetime],
        labels: Sequence[str] = (),
        headers: bool = True,
        sort_by: Template | None = None,
    ) -> None:
        self.format = parse_output(output)  # JsonPathError: a usage error
        self.output = self.format.name
        self.now = now
        self.labels = list(labels)  # -L: label columns, before REASON
        self.headers = headers
        self.sort_by = sort_by
        # The latest Warning about each object by UID (shown when it has no reason of its own).
        self.warnings: Mapping[str, str] = {}
        self.queue_view: QueueView | None = None  # each workload's queue and place in it
        self._widths: list[int] = []
        self._shown: dict[tuple[str, str, str], object] = {}

    def first(self, found: list[tuple[WorkloadKind, dict[str, Any]]], *, single: bool) -> None:
        found = [(kind, with_place(obj, self._place(kind, obj))) for kind, obj in found]
        if self.sort_by is not None:
            found = sorted_by(found, self.sort_by, lambda item: item[1])
        rows = [self._row(kind, obj) for kind, obj in found]
        for r, (_, obj) in zip(rows, found, strict=True):  # what a watch compares with
            self._shown[(r.kind, r.namespace, r.name)] = self._fingerprint(r, obj)
        objects = [obj for _, obj in found]
        document = objects[0] if single and len(objects) == 1 else as_list(objects)
        if self.output in ("json", "yaml"):
            click.echo(dump(document, self.output))
        elif self.output == "name":
            for kind, obj in found:
                click.echo(resource_name(kind, obj["metadata"]["name"]))
        elif self.output == "jsonpath":
            self._template(document)
        elif self.output == "custom-columns":
            lines = [[header for header, _ in self.format.columns]] if self.headers else []
            lines += [column_cells(self.format.columns, obj) for obj in objects]
            if objects:
                for line in aligned_rows(lines):
                    click.echo(safe(line))
        else:
            header = self._line(
                workloads.state_header(wide=self.output == "wide", queues=self._queues), None
            )
            table_lines = [
                header,
                *(self._line(self._cells(r), obj) for r, (_, obj) in zip(rows, found, strict=True)),
            ]
            if rows:  # else the header comes with the first row a watch prints
                self._widths = workloads.column_widths(table_lines)
                for row in table_lines if self.headers else table_lines[1:]:
                    click.echo(workloads.aligned(row, self._widths))
        sys.stdout.flush()

    def _cells(self, r: workloads.Row) -> tuple[str, ...]:
        return workloads.state_line(r, wide=self.output == "wide", queues=self._queues)

    @property
    def _queues(self) -> bool:
        return self.queue_view is not None and self.queue_view.shown

    def _place(self, kind: WorkloadKind, obj: Mapping[str, Any]) -> QueuePlace | None:
        return self.queue_view.place(kind, obj) if self.queue_view is not None else None

    def _line(self, cells: tuple[str, ...], obj: Mapping[str, Any] | None) -> tuple[str, ...]:
        """A table line with the -L label columns before REASON (the last, unpadded)."""
        if not self.labels:
            return cells
        extra = (
            [label_header(k) for k in self.labels] if obj is None else label_cells(self.labels, obj)
        )
        return (*cells[:-1], *extra, cells[-1])

    def _template(self, document: Any) -> None:
        assert self.format.template is not None
        if self.format.as_json:
            values = [
                value for node in self.format.template.nodes if node.kind == "path"
                for value in find(node.steps, document)
            ]  # fmt: skip
            click.echo(dump(values, "json"))
        else:
            click.echo(
                self.format.template.render(document), nl=False
            )  # a watch follows: what was listed shows at once through a pipe

    def _row(self, kind: WorkloadKind, obj: Mapping[str, Any]) -> workloads.Row:
        warning = self.warnings.get(Meta(obj).uid, "")
        place = self._place(kind, obj)
        return workloads.row(kind, obj, self.now(), warning=warning, place=place)

    def _fingerprint(self, r: workloads.Row, obj: Mapping[str, Any]) -> object:
        """What must differ for a watch to print the object again: what the table shows of
        it (ages aside); for json and yaml, anything but its resourceVersion."""
        if self.output in ("json", "yaml", "jsonpath", "custom-columns"):
            import msgspec

            metadata = {
                k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields")
            }  # fmt: skip
            return msgspec.json.encode({**obj, "metadata": metadata}, order="sorted")
        if self.output == "name":
            return r.identity()
        return r.identity(wide=self.output == "wide", queues=self._queues)

    def changed(self, kind: WorkloadKind, obj: dict[str, Any]) -> None:
        """A watch event's object: printed when what the table shows of it changed."""
        if self.queue_view is not None:
            self.queue_view.seen(kind, obj)
            obj = with_place(obj, self._place(kind, obj))
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
        elif self.output == "jsonpath":
            self._template(obj)
        elif self.output == "custom-columns":
            click.echo(safe("   ".join(column_cells(self.format.columns, obj))))
        else:
            wide = self.output == "wide"
            line = self._line(self._cells(r), obj)
            if not self._widths:  # nothing was listed: the header comes with the first row
                header = self._line(workloads.state_header(wide=wide, queues=self._queues), None)
                self._widths = workloads.column_widths([header, line])
                if self.headers:
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


def _checked_output(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    try:
        parse_output(value)
    except JsonPathError as error:
        raise click.BadParameter(str(error)) from None
    return value


def _checked_sort_by(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> Template | None:
    try:
        return sort_key_path(value) if value else None
    except JsonPathError as error:
        raise click.BadParameter(str(error)) from None


async def known_kinds(client: ApiClient, namespace: str, lease_name: str) -> list[KindNames]:
    """The kinds the controller runs (its leader records them on its Lease; Job and JobSet
    when no Lease says), each with the names discovery gives it (plural, short names)."""
    from jobrelay.cli.version import NoLease, read_leader
    from jobrelay.kinds.claims import parse_lease_entry
    from jobrelay.kube.errors import ApiError

    try:
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
    requests: list[Request],
    namespace: str,
    lease_name: str,
    claims: dict[str, str] | None = None,
) -> list[tuple[Request, tuple[WorkloadKind, ...]]]:
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


@click.command()
@click.argument("resource_type", metavar=TYPES_METAVAR, required=False, default=None,
                shell_complete=complete_types)  # fmt: skip
@click.argument("names", nargs=-1, shell_complete=complete_names)
@namespace_options
@click.option("-l", "--selector", default=None, help="Label selector (kubectl -l syntax).")
@click.option("-o", "--output", default=None, callback=_checked_output, metavar="FORMAT",
              shell_complete=lambda _c, _p, incomplete: [
                  CompletionItem(f) for f in (*OUTPUTS, "jsonpath=", "jsonpath-as-json=",
                                              "custom-columns=") if f.startswith(incomplete)],
              help="wide: more columns; json|yaml: a List of the objects as the apiserver "
                   "returns them; name: kind.group/NAME; jsonpath=TEMPLATE, "
                   "jsonpath-as-json=TEMPLATE, custom-columns=HEADER:PATH,... (kubectl's JSONPath).")  # fmt: skip
@click.option("--sort-by", default=None, callback=_checked_sort_by, metavar="JSONPATH",
              help="Sort by this field (e.g. .metadata.creationTimestamp, {.status.succeeded}).")  # fmt: skip
@click.option("--no-headers", is_flag=True, help="No header line (tables, custom-columns).")
@click.option("-L", "--label-columns", "label_columns_given", multiple=True, metavar="KEY,...",
              help="A column per label key, with its value (repeatable, comma-separated).")  # fmt: skip
@click.option(
    "-w", "--watch", is_flag=True, help="After listing, print every change (Ctrl-C stops)."
)
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              help="List workloads with this spec.managedBy.")  # fmt: skip
@click.option("--controller-namespace", default=DEFAULT_LEASE_NAMESPACE, show_default=True,
              help="The controller's namespace (`jobrelay run --namespace`): its Lease says "
                   "which kinds it runs, for `all` and their names.")  # fmt: skip
@manager_options
def get(
    resource_type: str | None,
    names: tuple[str, ...],
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    output: str | None,
    sort_by: Template | None,
    no_headers: bool,
    label_columns_given: tuple[str, ...],
    watch: bool,
    controller_name: str,
    controller_namespace: str,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """List managed workloads: cluster, state (Held, Pending, Dispatched, Running, Blocked,
    Complete, Failed, Suspended) and why, completions, age and duration.

    TYPE is jobs (the default), jobsets, all, any kind the controller runs (its plural,
    singular or short name) or Kind.version.group; TYPE NAME... or TYPE/NAME... as kubectl.
    REASON is why it waits or how it ended, else the latest Warning Event about it.
    QUEUE and POSITION: its RelayQueue and, while it waits there, its place (1 = next).
    Named workloads are shown whoever manages them; missing ones exit 3. `jobrelay jobs`
    is the same command.
    """
    try:
        requests = requests_of([resource_type, *names] if resource_type else list(names))
    except ArgumentsError as error:
        raise click.UsageError(str(error)) from None
    named = [name for request in requests for name in request.names]
    if all_namespaces and named:
        raise click.UsageError("a resource cannot be retrieved by name across all namespaces")
    if watch and len(requests) > 1:
        raise click.UsageError("watch one resource type at a time")
    if all_namespaces:
        where: str | None = None
    else:
        where = namespace or kubeconfig_namespace(kubeconfig, context)
    printer = Printer(
        output, now=lambda: datetime.now(UTC), labels=label_columns(label_columns_given),
        headers=not no_headers, sort_by=sort_by,
    )  # fmt: skip
    table = printer.format.is_table

    from jobrelay.vocabulary.leases import lease_name_for  # not at start-up: --help is quick

    async def go() -> Listed:
        async with manager_client(kubeconfig, context) as client:
            claims: dict[str, str] = {}
            resolved = await resolve(
                client, requests, controller_namespace, lease_name_for(controller_name), claims
            )
            queries = [
                Query(kinds, where, selector, request.names, controller_name,
                      explicit=request.type.lower() != "all", claims=claims)
                for request, kinds in resolved
            ]  # fmt: skip
            listed = Listed()
            for query in queries:
                part = await fetch(client, query)
                listed.found += part.found
                listed.missing += part.missing
                listed.refused += part.refused
                listed.versions.update(part.versions)
            for kind in listed.refused:
                click.echo(f"(left out: {kind.ref.plural}, which you may not list)", err=True)
            if table and listed.found:
                listed.warnings = await latest_warnings(client, where)
                printer.warnings = listed.warnings
            if printer.output != "name" and listed.found:
                printer.queue_view = await read_places(client, queries, listed.found)
            printer.first(listed.found, single=len(named) == 1)
            if not listed.found and not named and not watch and table:
                scope = "in any namespace" if where is None else f"in {where} namespace"
                click.echo(f"No resources found {scope}.", err=True)
            if watch:
                await follow(client, queries[0], listed, printer)
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
