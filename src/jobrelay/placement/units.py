"""Resource quantities as integers: CPU in milli-cores, everything else in whole units
(bytes for memory and storage, devices for GPUs and other extended resources).

Integers keep the per-node arithmetic exact and fast; the API's quantity strings are
parsed once, at the edge, and written back only in summaries and explanations.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal

from jobrelay.vocabulary.quantity import INT64_MAX, QuantityError, Unusable, parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
# Counted in milli-units: the only standard resource requested in fractions.
_MILLI = frozenset({CPU})
_BYTES = frozenset({MEMORY, "ephemeral-storage", "storage"})
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))

Resources = Mapping[str, int]


def _is_bytes(resource: str) -> bool:
    return resource in _BYTES or resource.startswith("hugepages-")


def to_units(resource: str, quantity: str | int | float | Decimal) -> int:
    """One quantity as this module's integer (rounded up: a request never shrinks);
    QuantityError (a ValueError) if malformed, negative, or beyond what Kubernetes counts
    (an int64 of these units: CPU's milli-units included, as its MilliValue)."""
    if type(quantity) is str:
        return _text_units(resource, quantity)
    return _units(resource, quantity)


# Workloads repeat a handful of quantities ("500m", "1Gi") thousands of times; only the
# API's strings are remembered (1 and 1.0 and True would share a key).
@functools.lru_cache(maxsize=4096)
def _text_units(resource: str, quantity: str) -> int:
    return _units(resource, quantity)


def _units(resource: str, quantity: str | int | float | Decimal) -> int:
    where = str(resource)[:63]
    try:
        value = quantity if isinstance(quantity, Decimal) else parse_quantity(quantity)
    except QuantityError as error:
        raise error.within(where) from None
    # Compared before any int() is built: a Decimal may be 1e999999.
    if not value.is_finite() or abs(value) > INT64_MAX:
        raise QuantityError(
            Unusable(str(quantity)[:100], "is not a number Kubernetes can count"), where
        )
    if value < 0:
        raise QuantityError(Unusable(str(quantity), "is negative"), where)
    if resource in _MILLI:
        value = value.scaleb(3)  # exact: only the exponent moves
    units = int(value.to_integral_value(rounding=ROUND_CEILING))
    if units > INT64_MAX:
        raise QuantityError(
            Unusable(str(quantity), f"is more than Kubernetes can count in milli-{resource}"),
            where,
        )
    return units


def resources_of(quantities: Mapping[str, str | int | float]) -> dict[str, int]:
    """A ``{resource: quantity}`` map (as the API writes it) as integers; QuantityError (a
    ValueError) naming the resource if one is unusable."""
    return {name: to_units(name, quantity) for name, quantity in quantities.items()}


def format_units(resource: str, value: int) -> str:
    """An integer of ``resource`` as the plainest Kubernetes quantity (``500m``, ``16Gi``)."""
    if resource in _MILLI:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if _is_bytes(resource) and value:
        for suffix, factor in _BINARY:
            if value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


def format_resources(values: Mapping[str, int]) -> dict[str, str]:
    return {name: format_units(name, value) for name, value in sorted(values.items())}
