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


def test_before_its_record_the_mirror_created_here_is_followed_and_a_swap_is_foreign() -> None:
    """The relay records a mirror's UID off the dispatch path; until then the create's
    answer names it, for the relay and the API alike: an object swapped in its place on
    the same worker, of the same run, is foreign, never followed nor shown."""
    owner = obj(("w-a",), {})
    ours, swapped = mirror(owner, "m-1", 1), mirror(owner, "forged", 1)
    kw: dict[str, Any] = {"controller_name": CONTROLLER, "origin": ORIGIN}
    created = (1, "m-1")
    assert mirror_standing(owner, "w-a", ours, created=created, **kw).name == "FOLLOWED"
    assert mirror_standing(owner, "w-a", swapped, created=created, **kw).name == "FOREIGN"
    # Not created by this process (a restart): the adoption rule, as before.
    assert mirror_standing(owner, "w-a", swapped, **kw).name == "ADOPTABLE"
    found = followed_mirror(owner, [("w-a", swapped)], created=lambda _w: created, **kw)
    assert found is None
    found = followed_mirror(owner, [("w-a", ours)], created=lambda _w: created, **kw)
    assert found == ("w-a", ours)
