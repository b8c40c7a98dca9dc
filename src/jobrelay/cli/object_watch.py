"""kubectl's list manners for the CLI's cluster-scoped lists (`queues`, `clusters`):
``-o wide|json|yaml|name|jsonpath=|jsonpath-as-json=|custom-columns=`` and ``-w``.

How the objects print (:class:`ObjectPrinter`) is pure given its table function; the
watch (:func:`watch_objects`) lists, then follows from the list's resourceVersion, listing
again when the apiserver says the version is gone. A watch prints each change as
``kubectl get -w`` does: the changed object's row (no header), document or name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobrelay.cli.jsonpath_rules import JsonPathError, find
from jobrelay.cli.output_rules import OUTPUT_HELP, Output, as_list, column_cells, dump, parse_output

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient
    from jobrelay.vocabulary.resource import Resource

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["ObjectPrinter", "list_output_option", "watch_objects", "watch_option"]

# A watch the apiserver ends is opened again; this bounds each one.
_WATCH_TIMEOUT_SECONDS = 300


def _checked(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    try:
        parse_output(value)
    except JsonPathError as error:
        raise click.BadParameter(str(error)) from None
    return value


def list_output_option(help_prefix: str = "") -> Callable[[F], F]:
    """``-o/--output`` as `get` takes it."""
    return click.option(
        "-o", "--output", default=None, callback=_checked, metavar="FORMAT",
        help=f"{help_prefix}{OUTPUT_HELP}",
    )  # fmt: skip


watch_option: Callable[[F], F] = click.option(
    "-w", "--watch", is_flag=True, help="After listing, print every change (Ctrl-C stops)."
)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class ObjectPrinter:
    """Prints a list of objects of one resource as ``-o`` asks, then each change.

    ``table(objects, wide)`` gives the header and one line per object, each starting
    with the object's name; ``resource_name`` is ``relayqueue.jobrelay.dev``'s kind.
    """

    def __init__(
        self,
        output: str | None,
        table: Callable[[Sequence[Mapping[str, Any]], bool], list[str]],
        resource_name: str,
        *,
        empty: str,
        echo: Callable[..., None] = click.echo,
    ) -> None:
        self.format: Output = parse_output(output)
        self.table = table
        self.resource_name = resource_name
        self.empty = empty
        self.echo = echo
        self.current: dict[str, Mapping[str, Any]] = {}

    def first(self, objects: Sequence[Mapping[str, Any]]) -> None:
        self.current = {_name(obj): obj for obj in objects}
        shape = self.format.name
        if shape in ("json", "yaml"):
            self.echo(dump(as_list(objects), shape))
        elif shape == "jsonpath":
            self._template(as_list(objects))
        elif shape == "custom-columns":
            self._columns(objects, header=True)
        elif shape == "name":
            for obj in objects:
                self.echo(f"{self.resource_name}/{_name(obj)}")
        elif not objects:
            self.echo(self.empty)
        else:
            for line in self.table(objects, shape == "wide"):
                self.echo(line)

    def changed(self, event: str, obj: Mapping[str, Any]) -> None:
        """One watch event: the object's new state printed (a deletion removes it)."""
        name = _name(obj)
        if event == "DELETED":
            self.current.pop(name, None)
            return
        self.current[name] = obj
        shape = self.format.name
        if shape in ("json", "yaml"):
            self.echo(dump(dict(obj), shape) + ("\n---" if shape == "yaml" else ""))
        elif shape == "jsonpath":
            self._template(obj)
        elif shape == "custom-columns":
            self._columns([obj], header=False)
        elif shape == "name":
            self.echo(f"{self.resource_name}/{name}")
        else:
            self.echo(changed_row(self.table(list(self.current.values()), shape == "wide"), name))

    def _template(self, document: Any) -> None:
        template = self.format.template
        assert template is not None
        if self.format.as_json:
            values = [
                value for node in template.nodes if node.kind == "path"
                for value in find(node.steps, document)
            ]  # fmt: skip
            self.echo(dump(values, "json"))
        else:  # as kubectl: no newline of its own (a template writes {"\n"})
            self.echo(template.render(document), nl=False)

    def _columns(self, objects: Sequence[Mapping[str, Any]], *, header: bool) -> None:
        from jobrelay.cli.output_rules import aligned_rows

        rows = [[title for title, _ in self.format.columns]] if header else []
        rows += [column_cells(self.format.columns, obj) for obj in objects]
        for line in aligned_rows(rows):
            self.echo(line)


def changed_row(lines: Sequence[str], name: str) -> str:
    """The line of object ``name`` in a table (header first, one line per object, each
    beginning with its name); the last line when none is found."""
    for line in lines[1:]:
        if line.split(" ", 1)[0] == name:
            return line
    return lines[-1] if lines else name


async def watch_objects(
    client: ApiClient, resource: Resource, version: str, printer: ObjectPrinter
) -> None:
    """Print every change of ``resource`` after ``version`` until interrupted."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.vocabulary.meta import Meta

    current: str | None = version
    while True:
        if current is None:
            page = await client.list(resource)
            current = page.resource_version
            for obj in page.items:
                printer.changed("MODIFIED", obj)
        try:
            async with client.watch(
                resource, resource_version=current, timeout_seconds=_WATCH_TIMEOUT_SECONDS
            ) as events:
                async for event in events:
                    if event.type == "ERROR":
                        current = None  # 410 Gone and its like: list again
                        break
                    obj = dict(event.object)
                    current = Meta(obj).resource_version or current
                    if event.type in ("ADDED", "MODIFIED", "DELETED"):
                        obj.setdefault("apiVersion", resource.api_version)
                        obj.setdefault("kind", resource.kind)
                        printer.changed(event.type, obj)
        except ApiError as error:
            if not error.is_gone:
                raise
            current = None
