"""The followed mirror of a workload: the recorded one, for the relay and the API alike."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.followed import FOLLOWED_STANDINGS, followed_mirror, mirror_standing
from jobrelay.kinds.mirrors import mirror_metadata

CONTROLLER, ORIGIN = "jobrelay.dev/controller", "o1"
WORKERS = ("w-a", "w-b", "w-c")


def obj(history: tuple[str, ...], records: dict[int, tuple[str, str]]) -> dict[str, Any]:
    annotations = {"jobrelay.dev/placements": ",".join(history)}
    if history:
        annotations["jobrelay.dev/cluster"] = history[-1]
    if records:
        annotations["jobrelay.dev/mirrors"] = ",".join(
            f"{run}:{w}:{uid}" for run, (w, uid) in sorted(records.items())
        )
    return {"metadata": {"name": "t", "namespace": "ns", "uid": "obj-uid",
                         "annotations": annotations}}  # fmt: skip


def mirror(owner: dict[str, Any], uid: str, run: int) -> dict[str, Any]:
    metadata = mirror_metadata(owner, controller_name=CONTROLLER, origin=ORIGIN, run=run)
    return {"metadata": {**metadata, "uid": uid}}


@given(
    history=st.lists(st.sampled_from(WORKERS), min_size=1, max_size=4).map(tuple),
    recorded=st.booleans(),
    shown=st.lists(
        st.tuples(st.sampled_from(WORKERS), st.sampled_from(["m-1", "m-2", "forged"]),
                  st.integers(min_value=1, max_value=9)),
        max_size=3, unique_by=lambda t: t[0],
    ),
)  # fmt: skip
def test_the_followed_mirror_is_recorded_or_adoptable_and_never_merely_the_highest_run(
    history: tuple[str, ...], recorded: bool, shown: list[tuple[str, str, int]]
) -> None:
    run = len(history)
    workload = obj(history, {run: (history[-1], "m-1")} if recorded else {})
    cached = [(w, mirror(workload, uid, r)) for w, uid, r in shown]
    found = followed_mirror(workload, cached, controller_name=CONTROLLER, origin=ORIGIN)
    followed = [
        (w, m) for w, m in cached
        if mirror_standing(workload, w, m, controller_name=CONTROLLER, origin=ORIGIN)
        in FOLLOWED_STANDINGS
    ]  # fmt: skip
    if not followed:
        assert found is None
        return
    assert found is not None and found in followed
    where, chosen = found
    if recorded:
        # Only the recorded worker and UID, whatever run another worker claims.
        assert (where, chosen["metadata"]["uid"]) == (history[-1], "m-1")
    else:
        assert where == history[-1]
