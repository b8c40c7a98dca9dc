"""Which ``managedBy`` value each kind claims, and where the kind keeps it (pure).

``--kind Kind.version.group[=value]`` names the value a kind's workloads carry
for jobrelay to dispatch them (default: the controller's name);
``--managed-by-field Kind.version.group=spec.runPolicy.managedBy`` says where a
kind without an adapter of its own keeps it. Some CRDs accept only their
operator's own value and Kueue's ``kueue.x-k8s.io/multikueue`` (a validation
rule): a value such a CRD refuses stops the start here, with the flag to write.

The leader records the kinds it runs on its Lease in the same syntax
(``Kind.version.group[=value][@field]``, comma-separated), so ``jobrelay get``
and ``jobrelay version`` read back exactly what it claims.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobrelay.kinds.base import MANAGED_BY_FIELDS, SPEC_MANAGED_BY, WorkloadKind
from jobrelay.kinds.catalog import KindError, parse_kind_name

# The value Kueue's MultiKueue dispatches under: the one value besides their operators'
# own that the KubeRay and Kubeflow Trainer CRDs accept, so jobrelay borrows it.
MULTIKUEUE = "kueue.x-k8s.io/multikueue"

# A managedBy value as Job's validation takes it (at most 63 characters), without the
# characters that separate a Lease's kinds (",", "=", "@") or any space.
_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~:/+-]{0,62}")


@dataclass(frozen=True, slots=True)
class KindClaim:
    """One ``--kind``: the kind's name and the managedBy value it claims (None: the default)."""

    name: str  # Kind.version.group, normalised
    managed_by: str | None = None


def _normalised(text: str, flag: str) -> str:
    try:
        kind, version, group = parse_kind_name(text)
    except KindError as error:
        raise KindError(str(error).replace("--kind", flag, 1)) from None
    return f"{kind}.{version}.{group}" if group else f"{kind}.{version}"


def value_problem(value: str) -> str | None:
    """Why ``value`` cannot be a managedBy value jobrelay claims; None when it can."""
    if _VALUE.fullmatch(value):
        return None
    return (
        f"{value[:80]!r} is not a managedBy value: 1 to 63 letters, digits and . _ ~ : / + -, "
        "starting with a letter or digit (e.g. kueue.x-k8s.io/multikueue)"
    )


def parse_kind_flag(text: str) -> KindClaim:
    """``Kind.version.group[=value]`` as a :class:`KindClaim`."""
    name, sep, value = text.strip().partition("=")
    normalised = _normalised(name, "--kind")
    if not sep:
        return KindClaim(normalised)
    if problem := value_problem(value):
        raise KindError(f"--kind {text[:120]!r}: {problem}")
    return KindClaim(normalised, value)


def parse_field_flag(text: str) -> tuple[str, str]:
    """``Kind.version.group=FIELD`` as (name, FIELD); FIELD one of the two places known."""
    name, _, place = text.strip().partition("=")
    normalised = _normalised(name, "--managed-by-field")
    if place not in MANAGED_BY_FIELDS:
        raise KindError(
            f"--managed-by-field {text[:120]!r}: write Kind.version.group=FIELD, FIELD one of "
            f"{' or '.join(MANAGED_BY_FIELDS)} (the only places a kind keeps managedBy)"
        )
    return normalised, place


def claim_problem(kind: WorkloadKind, value: str) -> str | None:
    """Why ``kind`` cannot claim ``value``: its CRD refuses it, or it is the operator's own
    (the operator on the manager would run the workload too); None when it can."""
    accepted = kind.crd_managed_by_values
    if not accepted or (value == MULTIKUEUE and value in accepted):
        return None
    field = ".".join(kind.managed_by_field)
    quoted = " or ".join(repr(v) for v in accepted)
    why = (
        "the operator's own value (its operator on the manager would run the workloads too)"
        if value in accepted
        else f"a value its CRD refuses (it accepts only {quoted} in {field})"
    )
    borrowable = MULTIKUEUE if MULTIKUEUE in accepted else accepted[-1]
    return (
        f"--kind {kind.name}: {value!r} is {why}; write --kind {kind.name}={borrowable} "
        "and label its workloads so (never run Kueue's MultiKueue on this manager then)"
    )


def field_problem(kind: WorkloadKind, place: str) -> str | None:
    """Why ``--managed-by-field`` cannot move the field of ``kind`` (an adapter's is known)."""
    if MANAGED_BY_FIELDS[place] == kind.managed_by_field:
        return None
    return (
        f"--managed-by-field {kind.name}={place}: {kind.name} keeps managedBy at "
        f"{'.'.join(kind.managed_by_field)} (its adapter knows); leave the flag out"
    )


def lease_entry(name: str, managed_by: str | None, field: tuple[str, ...]) -> str:
    """How the Lease records one kind: ``Kind.version.group[=value][@field]``."""
    value = f"={managed_by}" if managed_by else ""
    place = f"@{'.'.join(field)}" if field != SPEC_MANAGED_BY else ""
    return f"{name}{value}{place}"


@dataclass(frozen=True, slots=True)
class LeaseKind:
    """One kind as a Lease records it."""

    name: str
    managed_by: str | None = None
    field: tuple[str, ...] | None = None  # None: the kind's own (spec.managedBy if unknown)


def parse_lease_entry(text: str) -> LeaseKind | None:
    """A Lease's entry read back; None when it is not one (whoever may update the Lease
    writes it: anything malformed is skipped)."""
    rest, _, place = text.strip().partition("@")
    name, sep, value = rest.partition("=")
    try:
        normalised = _normalised(name, "--kind")
    except KindError:
        return None
    if (sep and value_problem(value)) or (place and place not in MANAGED_BY_FIELDS):
        return None
    return LeaseKind(normalised, value or None, MANAGED_BY_FIELDS[place] if place else None)


# Kueue's API group and the kinds that show its MultiKueue is installed.
KUEUE_GROUP = "kueue.x-k8s.io"
MULTIKUEUE_KINDS = frozenset({"MultiKueueCluster", "MultiKueueConfig"})


def multikueue_problem(claiming: list[str], served_kinds: set[str]) -> str | None:
    """Why kinds claiming MultiKueue's value cannot start on a manager whose discovery
    serves ``served_kinds`` of the kueue.x-k8s.io group; None when they can."""
    if not claiming or not served_kinds & MULTIKUEUE_KINDS:
        return None
    return (
        f"--kind {claiming[0]}={MULTIKUEUE}: Kueue's MultiKueue is installed on this "
        f"management cluster ({KUEUE_GROUP} serves {', '.join(sorted(served_kinds & MULTIKUEUE_KINDS))}) "
        "and owns that value: it would dispatch the same workloads. Run jobrelay on a "
        "manager without MultiKueue, or let MultiKueue dispatch these kinds"
    )
