"""`jobrelay get`'s kubectl output options (pure): ``-o jsonpath=``/``custom-columns=``,
``--sort-by``, ``-L`` label columns, ``--no-headers``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.cli.jsonpath_rules import JsonPathError, Template, find, parse_path, relaxed

NAMED_OUTPUTS = ("wide", "json", "yaml", "name")
OUTPUT_HELP = (
    "wide, json, yaml, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE or "
    "custom-columns=HEADER:PATH[,HEADER:PATH...] (kubectl's JSONPath)."
)


@dataclass(frozen=True)
class Output:
    """What ``-o`` asked for: a named format, or a template / columns."""

    name: str | None  # None (the table), wide, json, yaml, name, jsonpath, custom-columns
    template: Template | None = None
    columns: tuple[tuple[str, Template], ...] = ()
    as_json: bool = False  # jsonpath-as-json

    @property
    def is_table(self) -> bool:
        return self.name in (None, "wide")


def parse_output(text: str | None) -> Output:
    """``-o``'s value; JsonPathError (a usage error) when kubectl would refuse it."""
    if text is None or text in NAMED_OUTPUTS:
        return Output(text)
    kind, sep, value = text.partition("=")
    if kind in ("jsonpath", "jsonpath-as-json") and sep:
        if not value:
            raise JsonPathError("jsonpath template format specified but no template given")
        return Output("jsonpath", template=Template(value), as_json=kind == "jsonpath-as-json")
    if kind == "custom-columns" and sep:
        return Output("custom-columns", columns=custom_columns(value))
    raise JsonPathError(f"unknown output format {text!r}: {OUTPUT_HELP}")


def custom_columns(spec: str) -> tuple[tuple[str, Template], ...]:
    columns = []
    for part in spec.split(","):
        header, sep, path = part.partition(":")
        if not sep or not header or not path:
            raise JsonPathError(
                f"custom-columns: {part!r} is not HEADER:PATH (e.g. NAME:.metadata.name)"
            )
        columns.append((header, Template(relaxed(path))))
    return tuple(columns)


def column_cells(columns: Sequence[tuple[str, Template]], obj: Mapping[str, Any]) -> list[str]:
    """One object's cells: each path's values comma-separated, ``<none>`` when missing."""
    cells = []
    for _, template in columns:
        (node,) = template.nodes
        values = find(node.steps, obj)
        cells.append(",".join(_cell(v) for v in values) if values else "<none>")
    return cells


def _cell(value: Any) -> str:
    from jobrelay.cli.jsonpath_rules import format_value

    return format_value(value)


def aligned_rows(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, three spaces apart, as kubectl prints them."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def sort_key_path(text: str) -> Template:
    try:
        return Template(relaxed(text))
    except JsonPathError as error:
        raise JsonPathError(f"--sort-by: {error}") from None


def sorted_by(objects: Sequence[Any], path: Template, obj_of: Any = None) -> list[Any]:
    """``objects`` ordered by the value at ``path`` (numbers before strings, missing
    first), stable; ``obj_of`` picks the object out of each item."""
    (node,) = path.nodes

    def key(item: Any) -> tuple[int, Any]:
        values = find(node.steps, obj_of(item) if obj_of else item)
        if not values or values[0] is None:
            return (0, 0)
        value = values[0]
        if isinstance(value, bool):
            return (1, int(value))
        if isinstance(value, int | float):
            return (1, value)
        return (2, value if isinstance(value, str) else str(value))

    return sorted(objects, key=key)


def label_columns(values: Sequence[str]) -> list[str]:
    """``-L a,b -L c``: the label keys, in order."""
    return [key.strip() for value in values for key in value.split(",") if key.strip()]


def label_header(key: str) -> str:
    """kubectl's header of a label column: its name's last path part, upper case."""
    return key.rsplit("/", 1)[-1].upper()


def label_cells(keys: Sequence[str], obj: Mapping[str, Any]) -> list[str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [str(labels.get(key, "")) for key in keys]


__all__ = [
    "OUTPUT_HELP",
    "JsonPathError",
    "Output",
    "aligned_rows",
    "column_cells",
    "label_cells",
    "label_columns",
    "label_header",
    "parse_output",
    "parse_path",
    "sort_key_path",
    "sorted_by",
]


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
