"""WorkerCluster objects (admin-written, or left by an old version) and worker errors
(worker-written) of any shape: the CLI's reading, the worker pool's classification and
placement never raise."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.fuzz.hostile import anything, counted, fuzz, odd_text

from jobrelay.fleet import maintenance_rules, refusals
from jobrelay.fleet.workers import liveness_rules
from jobrelay.kube.errors import ApiError
from jobrelay.placement.decision import place
from jobrelay.placement.model import Cluster
from jobrelay.placement.workload import PodGroup, Workload

worker_clusters = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"name": odd_text,
                                                         "generation": anything}),
        "spec": st.fixed_dictionaries({}, optional={"cordoned": anything, "drain": anything}),
        "status": st.fixed_dictionaries(
            {}, optional={"conditions": st.lists(
                st.fixed_dictionaries({"type": st.just("Connected")},
                                      optional={"status": anything, "reason": anything,
                                                "message": anything}), max_size=2),
                          "activeMirrors": anything, "lostTime": anything,
                          "observedGeneration": anything}),
    },
)  # fmt: skip


@fuzz(400)
@given(worker_clusters, st.booleans(), st.floats(allow_nan=True))
@counted
def test_any_worker_cluster_reads_into_a_state_and_messages(
    obj: dict[str, Any], force: bool, timeout: float
) -> None:
    state = maintenance_rules.WorkerClusterView.of(obj)
    maintenance_rules.state_summary(state)
    maintenance_rules.decide_removal(state, force=force)
    maintenance_rules.drain_progress(state)
    for mode in maintenance_rules.DrainMode:
        maintenance_rules.drain_started_message(state, mode)
        maintenance_rules.drain_timeout_message(state, mode, timeout)
    maintenance_rules.cordon_message(state)
    maintenance_rules.uncordon_message(state)


@fuzz(400)
@given(
    st.fixed_dictionaries(
        {}, optional={"code": anything, "reason": anything, "message": odd_text | anything,
                      "details": anything}
    ),
    st.dictionaries(odd_text, st.tuples(st.booleans(), st.none()), max_size=3),
)  # fmt: skip
@counted
def test_any_worker_error_classifies_to_a_reason(status: dict[str, Any], informers: Any) -> None:
    try:
        error = ApiError.from_status(status)
    except (TypeError, ValueError):
        return  # the kube layer refuses it before classify sees it
    reason, message = refusals.classify(error)
    assert reason and isinstance(message, str)
    liveness_rules.verdict(error, informers, "https://w")
    liveness_rules.verdict(None, informers)


@fuzz(300)
@given(
    st.lists(
        st.builds(Cluster, odd_text, st.just({}), st.booleans(), st.booleans(), st.booleans(),
                  st.booleans(), st.none(), st.booleans(), st.integers(-(2**63), 2**63)),
        max_size=6,
    ),
    st.lists(odd_text, max_size=3),
)  # fmt: skip
@counted
def test_placement_of_any_candidates_picks_an_eligible_one(
    candidates: list[Cluster], excluded: list[str]
) -> None:
    workload = Workload((PodGroup("main", 1, {"cpu": 100}),))
    decision = place(candidates, workload, excluded=dict.fromkeys(excluded, "excluded"))
    if decision.cluster is not None:
        assert decision.cluster not in excluded
        assert any(
            c.name == decision.cluster
            and c.connected
            and not c.lost
            and not c.cordoned
            and not c.draining
            and c.blind
            for c in candidates
        )
    decision.explain()
