"""RelayQueues read into QueueSpecs (or refused with a reason, never a crash)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.admission.queue_model import (
    LabelSelector,
    QueueingStrategy,
    QueueSpec,
    Reclaim,
    WithinQueue,
)
from jobrelay.admission.queue_specs import InvalidQueue, read_queue, read_selector

GIB = 2**30


def queue(spec: Any, name: str = "team-a") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def test_the_issues_example_reads_whole() -> None:
    read = read_queue(
        queue(
            {
                "weight": 2,
                "namespaceSelector": {"matchLabels": {"team": "a"}},
                "queueingStrategy": "StrictFIFO",
                "nominalQuota": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"},
                "borrowingLimit": {"cpu": 16},
                "preemption": {"reclaimWithinFleet": "Any", "withinQueue": "LowerPriority"},
                "allowedPriorityClasses": ["batch-low", "batch-high"],
            }
        )
    )
    assert read == QueueSpec(
        name="team-a",
        weight=2.0,
        namespace_selector=LabelSelector({"team": "a"}),
        strategy=QueueingStrategy.STRICT_FIFO,
        nominal={"cpu": 32_000, "memory": 128 * GIB, "nvidia.com/gpu": 4},
        borrowing_limit={"cpu": 16_000},
        reclaim=Reclaim.ANY,
        within_queue=WithinQueue.LOWER_PRIORITY,
        allowed_priority_classes=frozenset({"batch-low", "batch-high"}),
    )


def test_an_empty_spec_takes_the_crds_defaults() -> None:
    for spec in (None, {}):
        assert read_queue(queue(spec)) == QueueSpec(name="team-a")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"weight": 0}, "spec.weight 0 is not greater than 0"),
        ({"weight": -1.5}, "spec.weight -1.5 is not greater than 0"),
        ({"weight": "two"}, "spec.weight 'two' is not a number"),
        ({"weight": True}, "spec.weight 'True' is not a number"),
        ({"weight": float("nan")}, "spec.weight nan is not greater than 0"),
        ({"queueingStrategy": "LIFO"}, "spec.queueingStrategy 'LIFO' is not one of BestEffortFIFO, StrictFIFO"),
        ({"preemption": {"reclaimWithinFleet": "Always"}}, "spec.preemption.reclaimWithinFleet 'Always' is not one of Never, LowerPriority, Any"),
        ({"preemption": {"withinQueue": "Any"}}, "spec.preemption.withinQueue 'Any' is not one of Never, LowerPriority"),
        ({"preemption": "Never"}, "spec.preemption is not an object"),
        ({"nominalQuota": {"cpu": "lots"}}, "spec.nominalQuota.cpu: 'lots' is not a Kubernetes quantity"),
        ({"borrowingLimit": {"memory": "-1Gi"}}, "spec.borrowingLimit.memory: '-1Gi' is negative"),
        ({"nominalQuota": ["cpu"]}, "spec.nominalQuota is not a map of resources to quantities"),
        ({"nominalQuota": {"cpu": None}}, "spec.nominalQuota.cpu: 'NoneType' is not a quantity"),
        ({"namespaceSelector": "team=a"}, "spec.namespaceSelector is not a label selector"),
        ({"namespaceSelector": {"matchLabels": {"team": 1}}}, "matchLabels is not a map of strings"),
        ({"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Is"}]}}, "operator 'Is' of 't' is not one of In, NotIn, Exists, DoesNotExist"),
        ({"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "In"}]}}, "'t' In needs values"),
        ({"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["a"]}]}}, "'t' Exists takes no values"),
        ({"namespaceSelector": {"matchExpressions": [{"operator": "Exists"}]}}, "holds an entry without a key"),
        ({"allowedPriorityClasses": "batch"}, "spec.allowedPriorityClasses is not a list of PriorityClass names"),
        ({"allowedPriorityClasses": ["batch", ""]}, "spec.allowedPriorityClasses is not a list of PriorityClass names"),
        ({"allowedPriorityClasses": [f"c{i}" for i in range(65)]}, "lists more than 64 names"),
        ("everything", "spec is not an object"),
    ],
)  # fmt: skip
def test_an_unusable_spec_is_refused_with_its_reason(spec: Any, reason: str) -> None:
    read = read_queue(queue(spec))
    assert isinstance(read, InvalidQueue) and read.name == "team-a"
    assert reason in read.reason, read.reason


def test_a_queue_without_a_name_is_invalid() -> None:
    assert read_queue({"spec": {}}) == InvalidQueue("", "it has no name")


def test_selectors_read_every_operator() -> None:
    selector = read_selector(
        {
            "matchLabels": {"team": "a"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                {"key": "frozen", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.matches({"team": "a", "tier": "gold"})
    assert not selector.matches({"team": "a", "tier": "gold", "frozen": "yes"})
    assert not selector.matches({"team": "b", "tier": "gold"})
    assert read_selector({}) == read_selector(None) == LabelSelector()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_fields = st.sampled_from(
    [
        "weight",
        "namespaceSelector",
        "queueingStrategy",
        "nominalQuota",
        "borrowingLimit",
        "preemption",
    ]
)


@given(st.dictionaries(_fields, _json, max_size=6), st.one_of(st.none(), _json))
def test_any_object_reads_as_a_spec_or_a_reason_never_raises(spec: Any, status: Any) -> None:
    read = read_queue({"metadata": {"name": "q"}, "spec": spec, "status": status})
    assert isinstance(read, QueueSpec | InvalidQueue)
    if isinstance(read, QueueSpec):
        assert read.weight > 0
        assert all(v >= 0 for v in (*read.nominal.values(), *read.borrowing_limit.values()))
