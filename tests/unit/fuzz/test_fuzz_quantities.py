"""Quantities from tenants (pod templates) and workers (Nodes, Pods), huge, tiny and
malformed: every reader returns a number or a refusal within a millisecond, never raises."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import JOB, JOBSET, job, jobset
from tests.unit.fuzz.hostile import anything, counted, fuzz, numbers, odd_text

from jobrelay.cli.clusters import capacity_text
from jobrelay.cli.fleetview import usage
from jobrelay.placement.slim_objects import slim_node, slim_pod
from jobrelay.placement.tracker import CapacityTracker
from jobrelay.placement.workload import Invalid, Workload, read_workload
from jobrelay.vocabulary.quantity import INT64_MAX, Unusable, read_quantity

# What a hostile tenant or worker writes where a quantity belongs.
HOSTILE = st.sampled_from(
    [
        "1e999999", "1e1000000", "-1e-999999", "1e-999999", "9" * 100_000, "1Ei" * 20_000,
        "1e2147483648", "1e4294967296", "1e9223372036854775808", "100Ei", "8Ei", "-8Ei",
        "9223372036854775808", "", " ", "1.5.5", "١٢", "\uff11\uff12", "NaN", "-Infinity", "1e",
        "0." + "0" * 98 + "1", "+", ".", "1_0", "\x00", "1Gi\n",
    ]
)  # fmt: skip
well_formed = st.builds(
    lambda whole, fraction, suffix: f"{whole}{fraction}{suffix}",
    st.text(alphabet="0123456789", min_size=1, max_size=25),
    st.one_of(st.just(""), st.text(alphabet="0123456789", max_size=12).map(lambda d: "." + d)),
    st.one_of(
        st.sampled_from(["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ei"]),
        st.integers(-(10**9), 10**9).map(lambda e: f"e{e}"),
    ),
)
quantities = st.one_of(HOSTILE, well_formed, odd_text, numbers)
resources = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi", "pods"]) | odd_text,
    quantities,
    max_size=3,
)
# Generous for a busy 2-core machine: each of these takes microseconds.
BOUND = 0.05


def _fast(call: Callable[[], Any]) -> Any:
    """The result of ``call``, asserting the best of three runs is quick."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - started)
    assert best < BOUND, f"{best:.3f}s"
    return result


@fuzz(800)
@given(quantities | anything)
@counted
def test_any_quantity_is_a_bounded_number_or_a_refusal(raw: Any) -> None:
    value = _fast(lambda: read_quantity(raw))
    assert isinstance(value, Unusable) or (value.is_finite() and abs(value) <= INT64_MAX)


def _pod_spec(requests: Any, limits: Any, init: Any, overhead: Any) -> dict[str, Any]:
    return {
        "containers": [{"name": "main", "resources": {"requests": requests, "limits": limits}}],
        "initContainers": [{"name": "init", "resources": {"requests": init}}],
        "overhead": overhead,
    }


@fuzz(400)
@given(resources, resources, resources, resources, st.booleans())
@counted
def test_a_tenants_pod_template_is_read_or_refused(
    requests: Any, limits: Any, init: Any, overhead: Any, as_jobset: bool
) -> None:
    spec = _pod_spec(requests, limits, init, overhead)
    if as_jobset:
        obj = jobset()
        obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"] = spec
    else:
        obj = job()
        obj["spec"]["template"]["spec"] = spec
    kind = JOBSET if as_jobset else JOB
    found = _fast(lambda: read_workload(kind, obj))
    assert isinstance(found, Workload | Invalid)
    if isinstance(found, Workload):
        for group in found.groups:
            assert all(q > 0 for q in group.requests.values())


@fuzz(400)
@given(resources, resources, st.sampled_from(["n1", "n2"]))
@counted
def test_a_workers_nodes_and_pods_are_counted_or_ignored(
    allocatable: Any, requests: Any, node_name: str
) -> None:
    tracker = CapacityTracker()
    node = {"metadata": {"name": node_name}, "status": {"allocatable": allocatable}}
    _fast(lambda: tracker.set_node(slim_node(node)))
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": node_name, **_pod_spec(requests, {}, {}, {})},
        "status": {"phase": "Running"},
    }
    slim = _fast(lambda: slim_pod(pod))
    _fast(lambda: tracker.set_pod("ns/p", slim))
    capacity = tracker.capacity()
    for found in capacity.nodes:
        assert all(abs(q) <= INT64_MAX for q in found.allocatable.values())


@fuzz(300)
@given(st.fixed_dictionaries({}, optional={"allocatable": resources, "requested": resources,
                                           "reserved": resources, "nodes": numbers}))  # fmt: skip
@counted
def test_the_cli_prints_any_capacity_status(capacity: dict[str, Any]) -> None:
    assert isinstance(_fast(lambda: capacity_text(capacity)), str)
    assert isinstance(_fast(lambda: usage(capacity, "memory")), str)
