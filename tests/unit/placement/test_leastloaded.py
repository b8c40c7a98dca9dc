from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.placement.leastloaded import Candidate, place

candidates = st.lists(
    st.builds(
        Candidate,
        name=st.sampled_from([f"w{i}" for i in range(6)]),
        connected=st.booleans(),
        cordoned=st.booleans(),
        active=st.integers(0, 50),
    ),
    unique_by=lambda c: c.name,
)


def test_picks_the_least_loaded_connected_worker() -> None:
    decision = place(
        [Candidate("a", True, active=3), Candidate("b", True, active=1), Candidate("c", False)]
    )
    assert decision.cluster == "b"
    assert decision.rejected == (("c", "not connected"),)


def test_nowhere_to_go_explains_every_worker() -> None:
    decision = place([Candidate("a", True)], excluded=["a"])
    assert decision.cluster is None
    assert "a: holds a Job of the same name" in decision.explain()
    assert place([]).explain() == "no worker clusters are registered"


@given(candidates, st.sets(st.sampled_from([f"w{i}" for i in range(6)])))
def test_choice_is_eligible_minimal_and_every_other_worker_is_accounted_for(
    workers: list[Candidate], excluded: set[str]
) -> None:
    decision = place(workers, excluded=excluded)
    eligible = [w for w in workers if w.connected and not w.cordoned and w.name not in excluded]
    if not eligible:
        assert decision.cluster is None
        assert len(decision.rejected) == len(workers)
        return
    chosen = next(w for w in workers if w.name == decision.cluster)
    assert chosen in eligible
    assert chosen.active == min(w.active for w in eligible)
    assert len(decision.rejected) == len(workers) - len(eligible)


@given(candidates)
def test_order_of_candidates_does_not_matter(workers: list[Candidate]) -> None:
    assert place(workers).cluster == place(list(reversed(workers))).cluster
