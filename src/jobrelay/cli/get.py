"""`jobrelay get [jobs|jobsets|all|Kind.version.group] [NAME...]`: managed workloads with
kubectl's habits (`jobrelay jobs` is the same command).

The command and its flags; what it lists and watches is in get_listing, how it prints
in get_printer (columns, states and reasons from :mod:`jobrelay.cli.workloads`, pure),
and which kinds a TYPE names in get_kinds. The API client is imported when it lists,
so that `jobrelay get --help` starts at once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem

from jobrelay.cli.common import (
    NotFound,
    _completions,
    kubeconfig_namespace,
    manager_client,
    manager_options,
    namespace_options,
    run_command,
)
from jobrelay.cli.controller_namespace import namespace_default_help
from jobrelay.cli.get_kinds import JOB_KIND, RESOURCE_TYPES, resolve
from jobrelay.cli.get_listing import Listed, WorkloadQuery, fetch, follow, latest_warnings
from jobrelay.cli.get_printer import Printer
from jobrelay.cli.jsonpath_rules import JsonPathError, Template
from jobrelay.cli.output_rules import label_columns, parse_output, sort_key_path
from jobrelay.cli.queue_positions import read_places
from jobrelay.cli.types_rules import ArgumentsError, requests_of
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

if TYPE_CHECKING:
    import asyncio

    from jobrelay.kube.client import ApiClient
    from jobrelay.kube.election.election_rules import LeaseFreshness

OUTPUTS = ("wide", "json", "yaml", "name")
TYPES_METAVAR = "[TYPE[,TYPE...]|TYPE/NAME]"


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
        query = WorkloadQuery(kinds, namespace, None, (), DEFAULT_CONTROLLER_NAME, explicit=False)
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
@click.option("--controller-namespace", default=None,
              help="The controller's namespace (`jobrelay run --namespace`): its Lease says "
                   f"which kinds it runs, for `all` and their names [default: {namespace_default_help()}].")  # fmt: skip
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
    controller_namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """List managed workloads: cluster, state (Held, Pending, Dispatched, Running, Blocked,
    Complete, Failed, Suspended) and why, completions, age and duration.

    TYPE is jobs (the default), jobsets, all, any kind the controller runs (its plural,
    singular or short name) or Kind.version.group; TYPE NAME... or TYPE/NAME... as kubectl.
    REASON is why it waits or how it ended, else the latest Warning Event about it.
    QUEUE and POSITION: its RelayQueue and, while it waits there, its place (1 = next).
    -o wide: ESTIMATED START, when a waiting one is likely to start (`describe` says why).
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
        import asyncio

        from jobrelay.cli.controller_lease import read_lease_freshness
        from jobrelay.cli.controller_namespace import locate_controller

        async with manager_client(kubeconfig, context) as client:
            # Read beside the listing (one GET), told before the first rows; --watch: once.
            lease_name = lease_name_for(controller_name)
            started = datetime.now(UTC)
            located = await locate_controller(client, controller_namespace, lease_name, started)
            lease_read = asyncio.create_task(
                read_lease_freshness(client, located.namespace, lease_name, started)
            )
            try:
                return await listing(client, located.namespace, lease_name, lease_read)
            finally:
                lease_read.cancel()

    async def listing(
        client: ApiClient,
        lease_namespace: str,
        lease_name: str,
        lease_read: asyncio.Task[LeaseFreshness | None],
    ) -> Listed:
        claims: dict[str, str] = {}
        resolved = await resolve(client, requests, lease_namespace, lease_name, claims)
        queries = [
            WorkloadQuery(kinds, where, selector, request.names, controller_name,
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
            printer.queue_view = await read_places(
                client, queries, listed.found, estimating=printer.output == "wide"
            )
        from jobrelay.cli.controller_lease import controller_lease_warning

        warning = controller_lease_warning(
            await lease_read, f"{lease_namespace}/{lease_name}", datetime.now(UTC),
            "--controller-namespace",
        )  # fmt: skip
        if warning:
            click.echo(warning, err=True)
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
