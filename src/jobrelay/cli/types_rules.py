"""What a resource type on `jobrelay get`/`describe` names (pure): kubectl's names of a
kind (plural, singular, short names, Kind, plural.group), ``Kind.version.group``, and the
kinds the controller is configured with (its leader records them on its Lease)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.catalog import default_plural, parse_kind_name

# The kinds every jobrelay dispatches unless told otherwise (when no Lease says which).
BUILT_IN = ("Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io")


class ArgumentsError(ValueError):
    """Arguments that name no resource, said in one line (a usage error)."""


@dataclass(frozen=True)
class KindNames:
    """Every name kubectl accepts for one kind."""

    name: str  # Kind.version.group
    kind: str
    group: str
    plural: str
    singular: str
    short_names: tuple[str, ...] = ()
    # The managedBy value the controller claims for the kind (None: its name), and
    # where a kind without an adapter keeps it (None: spec.managedBy), from its Lease.
    managed_by: str | None = None
    field: tuple[str, ...] | None = None

    @classmethod
    def of(
        cls,
        name: str,
        discovered: Mapping[str, Any] | None = None,
        *,
        managed_by: str | None = None,
        field: tuple[str, ...] | None = None,
    ) -> KindNames:
        """From ``Kind.version.group`` and, when known, its discovery entry."""
        kind, _, group = parse_kind_name(name)
        found = discovered or {}
        return cls(
            name, kind, group,
            str(found.get("name") or default_plural(kind)),
            str(found.get("singularName") or kind.lower()),
            tuple(str(s) for s in found.get("shortNames") or ()),
            managed_by, field,
        )  # fmt: skip

    def answers_to(self, text: str) -> bool:
        text = text.lower()
        names = {self.plural, self.singular, self.kind.lower(), *self.short_names}
        if text in names:
            return True
        base, _, group = text.partition(".")
        return bool(group) and base in names and group == self.group.lower()


def match_type(text: str, known: Sequence[KindNames]) -> list[KindNames]:
    """The kinds ``text`` names: ``all`` (every one known), a kubectl name of one, or
    ``Kind.version.group`` (any, configured or not); [] when none."""
    if text.lower() == "all":
        return list(known)
    for names in known:
        if names.answers_to(text) or names.name == text:
            return [names]
    try:
        parse_kind_name(text)
    except ValueError:
        return []
    return [KindNames.of(text)]


@dataclass(frozen=True)
class TypeRequest:
    """One resource type and the names asked of it (none: list them)."""

    type: str
    names: tuple[str, ...] = ()


def requests_of(arguments: Sequence[str], default: str = "jobs") -> list[TypeRequest]:
    """kubectl's argument forms: ``TYPE[,TYPE...] [NAME...]`` or ``TYPE/NAME...``."""
    if not arguments:
        return [TypeRequest(default)]
    if any("/" in argument for argument in arguments):
        requests: dict[str, list[str]] = {}
        for argument in arguments:
            kind, sep, name = argument.partition("/")
            if not sep or not kind or not name or "/" in name:
                raise ArgumentsError(
                    f"{argument!r}: arguments in TYPE/NAME form cannot be mixed with a "
                    "separate TYPE or NAME (there is no need for a TYPE argument then)"
                )
            requests.setdefault(kind, []).append(name)
        return [TypeRequest(kind, tuple(names)) for kind, names in requests.items()]
    types = [t for t in arguments[0].split(",") if t]
    names = tuple(arguments[1:])
    if names and len(types) > 1:
        raise ArgumentsError("name a single resource type with NAMEs (or use TYPE/NAME)")
    return [TypeRequest(t, names) for t in types]
