"""What a pod template asks of a node, by the Kubernetes rule.

A pod's effective request for a resource is the larger of the sum over its
app containers (plus restartable init containers, i.e. sidecars) and the
largest single init container (plus the sidecars started before it), plus the
pod overhead. Quantities are kept as the API writes them only at the edges;
sums are computed in milli-units or bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from decimal import ROUND_CEILING, Decimal

import msgspec

from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.quantity import QuantityError, Unusable, parse_quantity

__all__ = ["QuantityError", "format_quantity", "parse_quantity", "pod_requests"]


def format_quantity(value: Decimal) -> str:
    """A number in the plainest quantity form: whole numbers as is, else milli-units
    (rounded up, as Kubernetes' MilliValue does: a request never shrinks to nothing)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value(rounding=ROUND_CEILING))}m"


def _quantities(asked: JsonObj, where: str) -> dict[str, Decimal]:
    """``{resource: quantity}`` as numbers; QuantityError naming ``where`` and the resource."""
    parsed = {}
    for name, quantity in asked.items():
        try:
            value = parse_quantity(quantity)
        except QuantityError as error:
            raise error.within(f"{where}, {str(name)[:63]}") from None
        if value < 0:
            raise QuantityError(Unusable(str(quantity), "is negative"), f"{where}, {name}")
        parsed[str(name)] = value
    return parsed


def _requests(container: JsonObj) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    # Limits without requests default the requests (as the apiserver does).
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return _quantities(merged, f"container {str(container.get('name') or '')[:63]!r}")


def _add(into: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, Decimal(0)) + value


# The requests of the pod specs read last, by their JSON encoding: a workload is read
# several times (placement, its queue entry, its quota's limits) and thousands of Jobs
# share a template, while parsing quantities costs ten times the encoding. Keyed by the
# content, never the object, so an equal spec answers alike and a changed one anew. A
# tenant's spec may be large: only those within REMEMBERED_SPEC_BYTES are kept, so all
# that is kept stays within 1,024 x 16 KiB.
REQUESTS_REMEMBERED = 1024
REMEMBERED_SPEC_BYTES = 16 * 1024
_remembered: OrderedDict[bytes, dict[str, str]] = OrderedDict()
_encode = msgspec.json.Encoder().encode


def pod_requests(pod_spec: JsonObj) -> dict[str, str]:
    """The effective requests of one pod of this spec, as quantities; QuantityError (a
    ValueError) naming the container and the resource of the first unusable one."""
    try:
        content: bytes | None = _encode(pod_spec)
    except (TypeError, ValueError, msgspec.EncodeError):
        content = None  # not JSON (a caller's bug): read without remembering
    if content is not None and len(content) > REMEMBERED_SPEC_BYTES:
        content = None
    if content is not None and (known := _remembered.get(content)) is not None:
        _remembered.move_to_end(content)
        return dict(known)
    requests = _read_requests(pod_spec)
    if content is not None:
        _remembered[content] = requests
        if len(_remembered) > REQUESTS_REMEMBERED:
            _remembered.popitem(last=False)
    return dict(requests)


def _read_requests(pod_spec: JsonObj) -> dict[str, str]:
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
    overhead = _quantities(pod_spec.get("overhead") or {}, "the pod's overhead")
    _add(effective, overhead)
    return {name: format_quantity(value) for name, value in sorted(effective.items()) if value}
