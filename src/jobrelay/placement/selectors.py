"""Label selectors in ``kubectl -l`` syntax, and the requirements they are made of.

``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a`` (exists), ``!a``
(does not exist), comma-separated and all required. Node affinity's matchExpressions
(which add ``Gt`` and ``Lt``) use the same :class:`Requirement`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One condition on one label, matched as Kubernetes' labels.Selector does: ``NotIn``
    and ``DoesNotExist`` hold where the label is absent, ``Gt``/``Lt`` need an integer label."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case Operator.IN:
                return value is not None and value in self.values
            case Operator.NOT_IN:
                return value is None or value not in self.values
            case Operator.EXISTS:
                return value is not None
            case Operator.DOES_NOT_EXIST:
                return value is None
            case Operator.GT | Operator.LT:
                return _compare(self.operator, value, self.values)

    def __str__(self) -> str:
        values = ",".join(sorted(self.values))
        match self.operator:
            case Operator.IN:
                return (
                    f"{self.key}={values}" if len(self.values) == 1 else f"{self.key} in ({values})"
                )
            case Operator.NOT_IN:
                return (
                    f"{self.key}!={values}"
                    if len(self.values) == 1
                    else f"{self.key} notin ({values})"
                )
            case Operator.EXISTS:
                return self.key
            case Operator.DOES_NOT_EXIST:
                return f"!{self.key}"
            case _:
                return f"{self.key} {self.operator.value} {values}"


def _compare(operator: Operator, value: str | None, values: frozenset[str]) -> bool:
    if value is None or len(values) != 1:
        return False
    try:
        have, bound = int(value), int(next(iter(values)))
    except ValueError:
        return False
    return have > bound if operator is Operator.GT else have < bound


@dataclass(frozen=True, slots=True)
class Selector:
    """Requirements that must all hold (no requirements: everything matches)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


class SelectorError(ValueError):
    """A selector that does not parse; the message says where and why."""


# A qualified name with an optional DNS-subdomain prefix (``example.com/tier``).
_KEY = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_TOKEN = re.compile(r"\s*(\(|\)|,|!=|==|=|!|[^\s(),!=]+)")


def is_label_key(text: str) -> bool:
    """``text`` is a valid label (or taint) key: a qualified name, optionally prefixed."""
    return bool(_KEY.fullmatch(text))


def is_label_value(text: str) -> bool:
    """``text`` is a valid label (or taint) value; the empty string is one."""
    return bool(_VALUE.fullmatch(text))


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None:  # only trailing blanks are left
            break
        tokens.append(found.group(1))
        position = found.end()
    return tokens


def _key(token: str) -> str:
    if not _KEY.match(token):
        raise SelectorError(f"{token!r} is not a valid label key")
    return token


def _value(token: str) -> str:
    if not _VALUE.match(token) or token in {"(", ")", ",", "=", "==", "!=", "!"}:
        raise SelectorError(f"{token!r} is not a valid label value")
    return token


def parse_selector(text: str) -> Selector:
    """``text`` in ``kubectl -l`` syntax as a :class:`Selector`; SelectorError if malformed."""
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    index = 0

    def take() -> str:
        nonlocal index
        if index >= len(tokens):
            raise SelectorError("unexpected end of selector")
        index += 1
        return tokens[index - 1]

    def value_set() -> frozenset[str]:
        if take() != "(":
            raise SelectorError(f"expected '(' after {tokens[index - 2]!r}")
        values: list[str] = []
        while True:
            token = take()
            if token == ")" and not values:
                raise SelectorError("an empty value set '()' selects nothing")
            values.append(_value(token))
            separator = take()
            if separator == ")":
                return frozenset(values)
            if separator != ",":
                raise SelectorError(f"expected ',' or ')' in a value set, got {separator!r}")

    def single_value() -> str:
        # ``a=`` selects an empty value, as kubectl does.
        if index >= len(tokens) or tokens[index] == ",":
            return ""
        return _value(take())

    while index < len(tokens):
        token = take()
        if token == "!":
            requirements.append(Requirement(_key(take()), Operator.DOES_NOT_EXIST))
        else:
            key = _key(token)
            following = tokens[index] if index < len(tokens) else ","
            if following == ",":
                requirements.append(Requirement(key, Operator.EXISTS))
            elif following in {"=", "==", "!="}:
                index += 1
                operator = Operator.NOT_IN if following == "!=" else Operator.IN
                requirements.append(Requirement(key, operator, frozenset({single_value()})))
            elif following in {"in", "notin"}:
                index += 1
                operator = Operator.IN if following == "in" else Operator.NOT_IN
                requirements.append(Requirement(key, operator, value_set()))
            else:
                raise SelectorError(f"unexpected {following!r} after key {key!r}")
        if index < len(tokens):
            if tokens[index] != ",":
                raise SelectorError(f"expected ',' between requirements, got {tokens[index]!r}")
            index += 1
            if index == len(tokens):
                raise SelectorError("a selector cannot end with ','")
    if not requirements and text.strip():
        raise SelectorError(f"cannot parse {text!r}")
    return Selector(tuple(requirements))
