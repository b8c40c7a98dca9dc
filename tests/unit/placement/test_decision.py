from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.placement.support import cluster, node, pods

from jobrelay.placement.capacity import Reservation, WorkerCapacity
from jobrelay.placement.decision import place
from jobrelay.placement.filters import (
    FILTERS,
    Connected,
    JobClusters,
    JobSelector,
    NamespacePolicy,
    NotCordoned,
)
from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.nodefit import assign
from jobrelay.placement.scores import SCORES
from jobrelay.placement.selectors import parse_selector
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import Choice, PodGroup, Strategy, Workload

ANY = pods(1, cpu="1")


@pytest.mark.parametrize(
    ("rule", "state", "reason"),
    [
        (Connected(), {}, None),
        (Connected(), {"connected": False}, "not connected"),
        (Connected(), {"lost": True, "connected": False}, "lost"),
        (NotCordoned(), {"cordoned": True}, "cordoned"),
        (NotCordoned(), {"draining": True, "cordoned": True}, "draining"),
        (NotCordoned(), {}, None),
    ],
)
def test_state_filters(
    rule: Connected | NotCordoned, state: dict[str, bool], reason: str | None
) -> None:
    assert rule.reject(Request(ANY), Cluster("w", **state)) == reason  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("choice", "policy", "labels", "rule", "reason"),
    [
        (Choice(("a", "w")), None, {}, JobClusters(), None),
        (
            Choice(("a", "b")),
            None,
            {},
            JobClusters(),
            "not in the Job's jobrelay.dev/clusters (a,b)",
        ),
        (
            Choice(selector=parse_selector("region=west")),
            None,
            {"region": "west"},
            JobSelector(),
            None,
        ),
        (
            Choice(selector=parse_selector("region=west")),
            None,
            {},
            JobSelector(),
            "labels do not match the Job's jobrelay.dev/cluster-selector (region=west)",
        ),
        (Choice(), Choice(("a",)), {}, NamespacePolicy(), "excluded by namespace policy"),
        (
            Choice(),
            Choice(selector=parse_selector("!spot")),
            {"spot": ""},
            NamespacePolicy(),
            "excluded by namespace policy",
        ),
        (Choice(), Choice(selector=parse_selector("!spot")), {}, NamespacePolicy(), None),
        # A Job cannot widen its namespace's policy by naming the cluster itself.
        (Choice(("w",)), Choice(("a",)), {}, NamespacePolicy(), "excluded by namespace policy"),
    ],
)
def test_choice_and_policy_filters(
    choice: Choice, policy: Choice | None, labels: dict[str, str], rule: object, reason: str | None
) -> None:
    request = Request(Workload(ANY.groups, choice), policy)
    assert rule.reject(request, Cluster("w", labels)) == reason  # type: ignore[attr-defined]


def test_fit_filter_needs_known_capacity() -> None:
    assert FILTERS[-1].reject(Request(ANY), Cluster("w")) == "capacity not known yet"


def _three() -> list[Cluster]:
    return [
        cluster("a", node("a1", "8", used={"cpu": "6"})),
        cluster("b", node("b1", "8", used={"cpu": "2"})),
        cluster("c", node("c1", "8", used={"cpu": "4"})),
    ]


@pytest.mark.parametrize(
    ("strategy", "order", "chosen"),
    [
        (None, None, "b"),  # spread: least allocated after placing
        (Strategy.SPREAD, None, "b"),
        (Strategy.PACK, None, "a"),
        (Strategy.ORDERED, ("c", "a", "b"), "c"),
        (Strategy.ORDERED, None, "a"),  # no order given: by name
    ],
)
def test_scores(strategy: Strategy | None, order: tuple[str, ...] | None, chosen: str) -> None:
    decision = place(_three(), pods(1, Choice(order, None, strategy), cpu="1"))
    assert decision.cluster == chosen
    assert decision.strategy is (strategy or Strategy.SPREAD)
    assert {p.cluster for p in decision.passed_over} == {"a", "b", "c"} - {chosen}


def test_ordered_spills_over_only_while_the_first_is_full() -> None:
    choice = Choice(("a", "b"), None, Strategy.ORDERED)
    assert place(_three(), pods(1, choice, cpu="2")).cluster == "a"
    spilled = place(_three(), pods(1, choice, cpu="3"))
    assert spilled.cluster == "b"
    assert "a: no node has 3 cpu free (largest free: 2)" in spilled.explain()


def test_ties_go_to_the_first_name() -> None:
    twins = [cluster(name, node("n", "8")) for name in ("z", "m", "q")]
    for strategy in Strategy:
        assert place(twins, pods(1, Choice(strategy=strategy), cpu="1")).cluster == "m"


def test_a_namespace_policy_strategy_applies_unless_the_job_says() -> None:
    assert place(_three(), ANY, Choice(strategy=Strategy.PACK)).cluster == "a"
    job_says = pods(1, Choice(strategy=Strategy.SPREAD), cpu="1")
    assert place(_three(), job_says, Choice(strategy=Strategy.PACK)).cluster == "b"


def test_a_job_that_fits_the_total_but_no_node_is_not_sent() -> None:
    wide = cluster("wide", *(node(f"n{i}", "4") for i in range(8)))
    tall = cluster("tall", node("big", "16"))
    decision = place([wide, tall], pods(1, cpu="6"))
    assert decision.cluster == "tall"
    assert decision.explain() == "wide: no node has 6 cpu free (largest free: 4)"


def test_held_now_versus_never_fits() -> None:
    busy = [cluster("a", node("a1", "8", used={"cpu": "8"}))]
    held = place(busy, pods(1, cpu="4"))
    assert (held.cluster, held.never_fits) == (None, False)
    too_big = place([*busy, cluster("b", node("b1", "4"), connected=False)], pods(1, cpu="12"))
    assert (too_big.cluster, too_big.never_fits) == (None, True)
    # Excluded everywhere is explained, not NeverFits: a matching cluster may yet join.
    excluded = place(busy, pods(1, Choice(("elsewhere",)), cpu="1"))
    assert (excluded.never_fits, excluded.explain()) == (
        False,
        "a: not in the Job's jobrelay.dev/clusters (elsewhere)",
    )
    # Unknown capacity cannot be judged either way.
    assert not place([Cluster("x")], pods(1, cpu="64")).never_fits


def test_no_clusters() -> None:
    assert place([], ANY).explain() == "no worker clusters are registered"


# -- properties --------------------------------------------------------------------

cluster_names = [f"w{i}" for i in range(4)]
node_strategy = st.builds(
    lambda cpu, used, gpu, ready, cordoned, zone: node(
        "",
        str(cpu),
        gpu=gpu,
        used={"cpu": str(min(used, cpu))},
        labels={"zone": zone},
        ready=ready,
        unschedulable=cordoned,
    ),
    st.integers(1, 16),
    st.integers(0, 16),
    st.integers(0, 4),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["a", "b"]),
)
group_strategy = st.builds(
    lambda name, count, cpu, gpu, zone: PodGroup(
        name,
        count,
        resources_of({"cpu": str(cpu), **({"nvidia.com/gpu": str(gpu)} if gpu else {})}),
        {"zone": zone} if zone else {},
    ),
    st.sampled_from(["g1", "g2"]),
    st.integers(0, 6),
    st.integers(1, 8),
    st.integers(0, 2),
    st.sampled_from(["", "a", "b"]),
)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Cluster], Workload, Choice]:
    clusters = []
    for name in draw(st.lists(st.sampled_from(cluster_names), unique=True, max_size=4)):
        raw = draw(st.lists(node_strategy, min_size=0, max_size=4))
        nodes = tuple(
            type(n)(
                f"{name}-n{i}",
                n.allocatable,
                n.requested,
                n.labels,
                n.taints,
                n.unschedulable,
                n.ready,
            )
            for i, n in enumerate(raw)
        )
        reservations = tuple(
            Reservation(f"r{i}", (g,))
            for i, g in enumerate(draw(st.lists(group_strategy, max_size=2)))
        )
        clusters.append(
            Cluster(
                name,
                {"tier": draw(st.sampled_from(["gold", "bronze"]))},
                connected=draw(st.booleans()),
                cordoned=draw(st.booleans()),
                capacity=WorkerCapacity(nodes, reservations),
            )
        )
    choice = Choice(
        draw(
            st.none() | st.lists(st.sampled_from(cluster_names), unique=True, min_size=1).map(tuple)
        ),
        draw(st.sampled_from([None, parse_selector("tier=gold"), parse_selector("tier!=gold")])),
        draw(st.none() | st.sampled_from(Strategy)),
    )
    groups = tuple(
        {g.name: g for g in draw(st.lists(group_strategy, min_size=1, max_size=2))}.values()
    )
    policy = Choice(
        draw(st.none() | st.lists(st.sampled_from(cluster_names), min_size=1).map(tuple))
    )
    return clusters, Workload(groups, choice), policy


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_placement_properties(scenario: tuple[list[Cluster], Workload, Choice]) -> None:
    clusters, workload, policy = scenario
    decision = place(clusters, workload, policy)
    # Deterministic: the same input (in any order) gives the same decision.
    assert place(list(reversed(clusters)), workload, policy) == decision
    # Every cluster not chosen is explained, once.
    explained = [p.cluster for p in decision.passed_over]
    assert sorted(explained) == sorted(c.name for c in clusters if c.name != decision.cluster)
    assert all(p.reason for p in decision.passed_over)
    if decision.cluster is None:
        assert not decision.placed
        return
    assert not decision.never_fits
    chosen = next(c for c in clusters if c.name == decision.cluster)
    # No filter rejects the choice.
    request = Request(workload, policy)
    assert all(rule.reject(request, chosen) is None for rule in FILTERS)
    # Every pod is placed, on a node that allows it, and no node is over-committed
    # (on top of what is requested and what the reservations took).
    assert chosen.capacity is not None
    nodes = {n.name: n for n in chosen.capacity.nodes}
    groups = {g.name: g for g in workload.groups}
    for group in workload.groups:
        assert sum(p for g, _, p in decision.placed if g == group.name) == group.count
    used = {name: dict(n.requested) for name, n in nodes.items()}

    def take(group: PodGroup, node_name: str, count: int) -> None:
        for resource, quantity in {"pods": 1, **group.requests}.items():
            used[node_name][resource] = used[node_name].get(resource, 0) + quantity * count

    # Reservations take their room first, as the model places them.
    taken: dict[int, Mapping[str, int]] = {}
    for reservation in chosen.capacity.reservations:
        reserved = {g.name: g for g in reservation.groups}
        for group_name, node_name, count in assign(
            reservation.groups, chosen.capacity.pool, taken
        ).placed:
            take(reserved[group_name], node_name, count)
    for group_name, node_name, count in decision.placed:
        target, group = nodes[node_name], groups[group_name]
        assert target.schedulable
        assert group.allows(node_name, target.labels, target.taints) is None
        take(group, node_name, count)
    for node_name, totals in used.items():
        for resource, quantity in totals.items():
            allocatable = nodes[node_name].allocatable.get(
                resource, 1 << 40 if resource == "pods" else 0
            )
            assert quantity <= allocatable, (node_name, resource)


def test_every_strategy_has_a_score() -> None:
    assert set(SCORES) == set(Strategy)
