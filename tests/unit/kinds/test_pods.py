"""Pod requests by the Kubernetes rule: quantities, sums, init containers, sidecars, overhead."""

from __future__ import annotations

from decimal import Decimal

import pytest

from jobrelay.kinds.pods import format_quantity, parse_quantity, pod_requests
from jobrelay.vocabulary.json_types import JsonObj


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        (2, Decimal(2)),
        (0.5, Decimal("0.5")),
        ("500m", Decimal("0.5")),
        ("250u", Decimal("0.00025")),
        ("7n", Decimal("0.000000007")),
        ("1.5", Decimal("1.5")),
        ("2k", Decimal(2000)),
        ("3M", Decimal(3_000_000)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
        ("1Ki", Decimal(1024)),
        ("1.5Mi", Decimal(1572864)),
        ("2Gi", Decimal(2 * 2**30)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1e3", Decimal(1000)),
        ("12E3", Decimal(12000)),  # an exponent, not the exa suffix
        (" 4 ", Decimal(4)),
    ],
)
def test_parse_quantity(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "m", "Gi", "abc", "1GB", "1..5", "--1"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal(3), "3"),
        (Decimal("3.000"), "3"),
        (Decimal("0.5"), "500m"),
        (Decimal("2.25"), "2250m"),
        (Decimal(2**30), "1073741824"),
    ],
)
def test_format_quantity(value: Decimal, text: str) -> None:
    assert format_quantity(value) == text
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("value", "text"),
    [(Decimal("0.0001"), "1m"), (Decimal("0.0025"), "3m"), (Decimal("1.0000001"), "1001m")],
)
def test_format_quantity_rounds_milli_units_up(value: Decimal, text: str) -> None:
    # As Kubernetes' MilliValue: a tiny request is 1m, never 0m.
    assert format_quantity(value) == text


def test_a_sub_milli_request_is_not_lost() -> None:
    spec = {"containers": [container("main", {"cpu": "100u"})]}
    assert pod_requests(spec) == {"cpu": "1m"}


def container(name: str, requests: JsonObj | None = None, **extra: object) -> JsonObj:
    resources: JsonObj = {"requests": requests} if requests is not None else {}
    if "limits" in extra:
        resources["limits"] = extra.pop("limits")
    return {"name": name, "resources": resources, **extra}


def test_app_containers_add_up() -> None:
    spec = {
        "containers": [
            container("a", {"cpu": "500m", "memory": "1Gi"}),
            container("b", {"cpu": "250m", "memory": "512Mi"}),
            {"name": "c"},
        ]
    }
    assert pod_requests(spec) == {"cpu": "750m", "memory": str(3 * 2**29)}


def test_limits_default_the_requests_they_lack() -> None:
    spec = {
        "containers": [
            container("a", {"cpu": "1"}, limits={"cpu": "4", "memory": "2Gi"}),
            container("b", limits={"nvidia.com/gpu": "1"}),
        ]
    }
    assert pod_requests(spec) == {"cpu": "1", "memory": str(2 * 2**30), "nvidia.com/gpu": "1"}


def test_the_largest_init_container_counts_when_larger() -> None:
    spec = {
        "initContainers": [container("setup", {"cpu": "2", "memory": "64Mi"})],
        "containers": [container("main", {"cpu": "1", "memory": "1Gi"})],
    }
    assert pod_requests(spec) == {"cpu": "2", "memory": str(2**30)}


def test_sidecars_run_beside_the_app_and_the_init_containers_after_them() -> None:
    spec = {
        "initContainers": [
            container("first", {"cpu": "1500m"}),  # runs alone
            container("proxy", {"cpu": "500m"}, restartPolicy="Always"),  # a sidecar
            container("migrate", {"cpu": "1200m"}),  # runs beside the proxy: 1.7
        ],
        "containers": [container("main", {"cpu": "1"})],  # beside the proxy: 1.5
    }
    assert pod_requests(spec) == {"cpu": "1700m"}


def test_overhead_is_added_and_nothing_requested_is_nothing() -> None:
    spec = {
        "containers": [container("main", {"cpu": "1", "memory": "0"})],
        "overhead": {"cpu": "100m", "memory": "120Mi"},
    }
    assert pod_requests(spec) == {"cpu": "1100m", "memory": str(120 * 2**20)}
    assert pod_requests({"containers": [container("main", {"cpu": "0"})]}) == {}
    assert pod_requests({}) == {}


def test_a_malformed_quantity_is_an_error() -> None:
    with pytest.raises(ValueError):
        pod_requests({"containers": [container("main", {"cpu": "lots"})]})


def test_remembered_requests_are_read_by_content_and_never_shared_out() -> None:
    """pod_requests remembers a spec's requests by its JSON content: an equal spec (another
    object) gets the same answer, a changed one is read anew, an answer changed by its
    caller changes nothing remembered, and what is remembered is bounded."""
    from jobrelay.kinds import pods

    spec: JsonObj = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m"}}}]}
    first = pod_requests(spec)
    assert first == {"cpu": "250m"}
    first["cpu"] = "99"  # the caller's copy
    equal = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m"}}}]}
    assert pod_requests(equal) == {"cpu": "250m"}
    spec["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert pod_requests(spec) == {"cpu": "2"}
    for number in range(pods.REQUESTS_REMEMBERED + 10):
        pod_requests({"containers": [{"resources": {"requests": {"cpu": f"{number + 1}m"}}}]})
    assert len(pods._remembered) == pods.REQUESTS_REMEMBERED
    # A tenant's big spec is read, never kept: what is kept stays bounded in bytes.
    big: JsonObj = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "3"}},
                                    "args": ["x" * pods.REMEMBERED_SPEC_BYTES]}]}  # fmt: skip
    assert pod_requests(big) == {"cpu": "3"}
    assert all(len(content) <= pods.REMEMBERED_SPEC_BYTES for content in pods._remembered)
    with pytest.raises(ValueError, match="container 'a', cpu"):
        pod_requests({"containers": [{"name": "a", "resources": {"requests": {"cpu": "x"}}}]})
