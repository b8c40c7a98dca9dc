"""What a pod template asks of a node, by the Kubernetes rule.

A pod's effective request for a resource is the larger of the sum over its
app containers (plus restartable init containers, i.e. sidecars) and the
largest single init container (plus the sidecars started before it), plus the
pod overhead. Quantities are kept as the API writes them only at the edges;
sums are computed in milli-units or bytes.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation

from jobrelay.kinds.types import JsonObj

_SUFFIXES = {
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}


def parse_quantity(text: str | int | float) -> Decimal:
    """A Kubernetes quantity (``500m``, ``2Gi``, ``1e3``) as a number; ValueError if malformed."""
    value = str(text).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if value.endswith(suffix) and value[: -len(suffix)]:
            number, factor = value[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, factor = value, Decimal(1)
    try:
        return Decimal(number) * factor
    except InvalidOperation as error:
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from error


def format_quantity(value: Decimal) -> str:
    """A number in the plainest quantity form: whole numbers as is, else milli-units
    (rounded up, as Kubernetes' MilliValue does: a request never shrinks to nothing)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value(rounding=ROUND_CEILING))}m"


def _requests(container: JsonObj) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    # Limits without requests default the requests (as the apiserver does).
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(quantity) for name, quantity in merged.items()}


def _add(into: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, Decimal(0)) + value


def pod_requests(pod_spec: JsonObj) -> dict[str, str]:
    """The effective requests of one pod of this spec, as quantities."""
    app: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or []:
        _add(app, _requests(container))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        requests = _requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            continue
        running = dict(sidecars)
        _add(running, requests)
        for name, value in running.items():
            init_peak[name] = max(init_peak.get(name, Decimal(0)), value)
    _add(app, sidecars)
    effective = {
        name: max(app.get(name, Decimal(0)), init_peak.get(name, Decimal(0)))
        for name in app.keys() | init_peak.keys()
    }
    overhead = {
        name: parse_quantity(quantity)
        for name, quantity in (pod_spec.get("overhead") or {}).items()
    }
    _add(effective, overhead)
    return {name: format_quantity(value) for name, value in sorted(effective.items()) if value}
