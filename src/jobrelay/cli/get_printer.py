"""How `jobrelay get` prints workloads: kubectl's output formats (a table, wide, json,
yaml, name, jsonpath, custom-columns), and in a watch only the rows that changed.

Columns, states and reasons come from :mod:`jobrelay.cli.workloads` (pure).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import click

from jobrelay.admission.queue_places import QueuePlace
from jobrelay.cli import workloads
from jobrelay.cli.jsonpath_rules import Template, find
from jobrelay.cli.output_rules import (
    aligned_rows,
    as_list,
    column_cells,
    dump,
    label_cells,
    label_header,
    parse_output,
    sorted_by,
)
from jobrelay.cli.queue_positions import QueueView, with_place
from jobrelay.cli.terminal import safe
from jobrelay.kinds.base import WorkloadKind
from jobrelay.readmodel.estimate_reads import estimate_words
from jobrelay.vocabulary.meta import Meta

__all__ = ["Printer", "resource_name"]


def resource_name(kind: WorkloadKind, name: str) -> str:
    """``job.batch/NAME`` as ``kubectl get -o name`` prints it."""
    group = f".{kind.ref.group}" if kind.ref.group else ""
    return f"{kind.ref.kind.lower()}{group}/{name}"


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
        now = self.now()
        estimated = "-"
        if self.output == "wide" and self.queue_view is not None:
            estimated = estimate_words(self.queue_view.estimate(kind, obj, now), now)
        return workloads.row(
            kind, obj, now, warning=warning, place=place, estimated_start=estimated
        )

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
