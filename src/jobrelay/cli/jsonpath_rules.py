"""kubectl's JSONPath templates (pure): ``-o jsonpath=``, ``custom-columns=``, ``--sort-by``.

The subset kubectl documents: text with ``{expressions}``; ``$``/``@``; ``.field`` (``\\.``
escapes a dot, ``['a.b']`` names any key); ``..field`` (recursive); ``*``; ``[n]``,
``[-n]``, ``[a:b]``; ``[?(@.path OP literal)]`` (``== != < <= > >=``) and ``[?(@.path)]``;
``{range EXPR}...{end}``; string literals ``{"\\n"}``. (No PyPI package implements
kubectl's template syntax: jsonpath-ng reads paths, not ``{range}`` templates.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["JsonPathError", "Template", "find", "format_value", "relaxed"]


class JsonPathError(ValueError):
    """A template kubectl would refuse, said in one line."""


# -- paths --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathStep:
    kind: str  # "root", "current", "field", "recursive", "all", "index", "slice", "filter"
    name: str = ""
    index: int = 0
    bounds: tuple[int | None, int | None, int | None] = (None, None, None)
    filter: tuple[tuple[PathStep, ...], str, Any] | None = None


_FIELD = re.compile(r"(?:\\.|[^.\[\]\\\s])+")
_FILTER = re.compile(r"^\s*(@[^=!<>]*?)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*$")


def parse_path(text: str) -> tuple[PathStep, ...]:
    """A path (``.a.b[*]``, ``@.x``, ``$..y``) as steps; JsonPathError if malformed."""
    steps: list[PathStep] = []
    at = 0
    text = text.strip()
    while at < len(text):
        char = text[at]
        if char == "$" and not steps:
            steps.append(PathStep("root"))
            at += 1
        elif char == "@" and not steps:
            steps.append(PathStep("current"))
            at += 1
        elif text.startswith("..", at):
            match = _FIELD.match(text, at + 2)
            if not match:
                raise JsonPathError(f"a field name must follow '..' in {text!r}")
            steps.append(PathStep("recursive", _unescape(match.group())))
            at = match.end()
        elif char == ".":
            match = _FIELD.match(text, at + 1)
            if not match:  # a lone "." is the current object
                at += 1
                continue
            name = _unescape(match.group())
            steps.append(PathStep("all") if name == "*" else PathStep("field", name))
            at = match.end()
        elif char == "[":
            close = _closing_bracket(text, at)
            steps.append(_bracket(text[at + 1 : close].strip(), text))
            at = close + 1
        else:
            match = _FIELD.match(text, at)  # "metadata.name" without its leading dot
            if not match or steps:
                raise JsonPathError(f"unexpected {char!r} at {at} in {text!r}")
            steps.append(PathStep("field", _unescape(match.group())))
            at = match.end()
    return tuple(steps)


def _unescape(name: str) -> str:
    return name.replace("\\.", ".")


def _closing_bracket(text: str, start: int) -> int:
    depth, quote = 0, ""
    for at in range(start, len(text)):
        char = text[at]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
            if depth == 0:
                return at
    raise JsonPathError(f"unclosed '[' in {text!r}")


def _bracket(inner: str, text: str) -> PathStep:
    if inner == "*":
        return PathStep("all")
    if inner[:1] in "'\"" and inner[-1:] == inner[:1] and len(inner) >= 2:
        return PathStep("field", inner[1:-1])
    if inner.startswith("?(") and inner.endswith(")"):
        match = _FILTER.match(inner[2:-1])
        if not match:
            raise JsonPathError(f"cannot read the filter {inner!r} in {text!r}")
        path, operator, literal = match.groups()
        return PathStep("filter", filter=(parse_path(path), operator or "", _literal(literal)))
    try:
        if ":" in inner:
            parts = [int(p) if p.strip() else None for p in inner.split(":")]
            if len(parts) > 3:
                raise ValueError(inner)
            padded = [*parts, None, None][:3]
            return PathStep("slice", bounds=(padded[0], padded[1], padded[2]))
        return PathStep("index", index=int(inner))
    except ValueError:
        raise JsonPathError(f"cannot read [{inner}] in {text!r}") from None


def _literal(text: str | None) -> Any:
    if text is None:
        return None
    text = text.strip()
    if text[:1] in "'\"" and text[-1:] == text[:1] and len(text) >= 2:
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def find(steps: tuple[PathStep, ...], root: Any, current: Any | None = None) -> list[Any]:
    """Every value the path selects in ``root`` (``@`` being ``current``, else root)."""
    nodes = [root]
    for step in steps:
        if step.kind == "root":
            nodes = [root]
        elif step.kind == "current":
            nodes = [root if current is None else current]
        else:
            nodes = [found for node in nodes for found in _apply(step, node)]
    return nodes


def _apply(step: PathStep, node: Any) -> Iterator[Any]:
    if step.kind == "field":
        if isinstance(node, dict) and step.name in node:
            yield node[step.name]
    elif step.kind == "all":
        if isinstance(node, dict):
            yield from node.values()
        elif isinstance(node, list):
            yield from node
    elif step.kind == "recursive":
        yield from _descend(node, step.name)
    elif step.kind == "index":
        if isinstance(node, list) and -len(node) <= step.index < len(node):
            yield node[step.index]
    elif step.kind == "slice":
        if isinstance(node, list):
            start, stop, stride = step.bounds
            yield from node[slice(start, stop, stride or None)]
    elif step.kind == "filter" and step.filter is not None:
        items = node if isinstance(node, list) else [node]
        path, operator, literal = step.filter
        for item in items:
            if _matches(find(path, item, item), operator, literal):
                yield item


def _descend(node: Any, name: str) -> Iterator[Any]:
    if isinstance(node, dict):
        if name in node:
            yield node[name]
        for value in node.values():
            yield from _descend(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from _descend(value, name)


def _matches(found: list[Any], operator: str, literal: Any) -> bool:
    if not operator:
        return bool(found)
    for value in found:
        try:
            if (
                (operator == "==" and value == literal)
                or (operator == "!=" and value != literal)
                or (operator == "<" and value < literal)
                or (operator == "<=" and value <= literal)
                or (operator == ">" and value > literal)
                or (operator == ">=" and value >= literal)
            ):
                return True
        except TypeError:  # a number against a string: no match, as kubectl
            continue
    return False


def format_value(value: Any) -> str:
    """A value as kubectl's JSONPath prints it: strings bare, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# -- templates ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PathNode:
    kind: str  # "text", "path", "range"
    text: str = ""
    steps: tuple[PathStep, ...] = ()
    body: tuple[PathNode, ...] = ()


_STRING = re.compile(r"""^\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*$""")


class Template:
    """A parsed JSONPath template, rendered against any object."""

    def __init__(self, text: str) -> None:
        self.text = text
        nodes, rest = _parse(_pieces(text), text)
        if rest:
            raise JsonPathError(f"{{end}} without {{range}} in {text!r}")
        self.nodes = nodes

    def render(self, obj: Any) -> str:
        return "".join(_render(self.nodes, obj, obj))


def _pieces(text: str) -> list[tuple[str, str]]:
    """("text", ...) and ("expr", ...) pieces; braces inside quotes do not count."""
    pieces: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        start = text.find("{", at)
        if start < 0:
            pieces.append(("text", text[at:]))
            break
        if start > at:
            pieces.append(("text", text[at:start]))
        end, quote = start + 1, ""
        while end < len(text) and (quote or text[end] != "}"):
            char = text[end]
            if quote and char == "\\":
                end += 1
            elif quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            end += 1
        if end >= len(text):
            raise JsonPathError(f"unclosed '{{' in {text!r}")
        pieces.append(("expr", text[start + 1 : end]))
        at = end + 1
    return pieces


def _parse(pieces: list[tuple[str, str]], text: str) -> tuple[tuple[PathNode, ...], list[Any]]:
    nodes: list[PathNode] = []
    while pieces:
        kind, value = pieces.pop(0)
        if kind == "text":
            nodes.append(PathNode("text", value))
            continue
        stripped = value.strip()
        if stripped == "end":
            return tuple(nodes), [True]
        if stripped.startswith("range "):
            body, closed = _parse(pieces, text)
            if not closed:
                raise JsonPathError(f"{{range}} without {{end}} in {text!r}")
            nodes.append(PathNode("range", steps=parse_path(stripped[6:]), body=body))
            continue
        string = _STRING.match(value)
        if string:
            said = string.group(1) if string.group(1) is not None else string.group(2)
            nodes.append(PathNode("text", _unquote(said)))
            continue
        nodes.append(PathNode("path", steps=parse_path(stripped)))
    return tuple(nodes), []


def _unquote(text: str) -> str:
    return re.sub(
        r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), text
    )


def _render(nodes: tuple[PathNode, ...], root: Any, current: Any) -> Iterator[str]:
    for node in nodes:
        if node.kind == "text":
            yield node.text
        elif node.kind == "path":
            yield " ".join(format_value(v) for v in find(node.steps, root, current))
        else:
            for item in find(node.steps, root, current):
                yield from _render(node.body, item, item)


def relaxed(text: str) -> str:
    """A custom-columns or --sort-by path as kubectl relaxes it: ``.a.b``, ``a.b`` and
    ``{.a.b}`` are all ``{.a.b}``."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if not text.startswith((".", "$", "@", "[")):
        text = "." + text
    return "{" + text + "}"
