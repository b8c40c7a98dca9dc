"""decide() and a workload's ConfigMaps, Secrets and ServiceAccount: held while one it
requires is missing or may not be copied, copied before its mirror, kept current and
owned while the mirror runs, never written over someone else's object."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import job, mirror, snapshot, summary, worker

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    Annotate,
    CopyDependencies,
    CreateMirror,
    Place,
    Plan,
    RecordEvent,
    RequeueAfter,
    Retry,
)
from jobrelay.controller.relay.snapshot import Needed, Snapshot, WorkerSnapshot
from jobrelay.dependencies.copy_rules import MAX_CONTENT_BYTES, Copy, Source
from jobrelay.dependencies.template_references import Dependency
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

SETTINGS = Dependency("configmap", "settings")
CREDS = Dependency("secret", "creds")
OPTIONAL = Dependency("configmap", "extra", optional=True)
PRESENT = Source("src-1", "d1", 10)
TOKEN = Source("src-2", "d2", 10, "kubernetes.io/service-account-token")
HUGE = Source("src-3", "d3", MAX_CONTENT_BYTES + 1)


def needing(s: Snapshot, *needed: tuple[Dependency, Source | None], **extra: Any) -> Snapshot:
    return dataclasses.replace(s, dependencies=tuple(Needed(d, src) for d, src in needed), **extra)


def kinds_of(plan: Plan) -> list[str]:
    return [type(a).__name__ for a in plan.actions]


def copies(plan: Plan) -> list[CopyDependencies]:
    return [a for a in plan.actions if isinstance(a, CopyDependencies)]


# -- held before placement -------------------------------------------------------------


@pytest.mark.parametrize(
    ("needed", "reason", "starts"),
    [
        ([(SETTINGS, None)], "MissingDependency", "configmap/settings does not exist in "),
        (
            [(SETTINGS, None), (CREDS, None)],
            "MissingDependency",
            "configmap/settings, secret/creds do not exist in ",
        ),
        ([(CREDS, TOKEN)], "DependencyRefused", "secret/creds is a ServiceAccount token Secret"),
        ([(SETTINGS, HUGE)], "DependencyTooLarge", "configmap/settings holds "),
        ([(SETTINGS, HUGE), (CREDS, None)], "MissingDependency", "secret/creds does not"),
    ],
)
def test_held_unplaced_with_the_dependency_first(
    needed: list[tuple[Dependency, Source | None]], reason: str, starts: str
) -> None:
    plan = decide(needing(snapshot(job(), worker("w1")), *needed))
    assert [summary(a) for a in plan.actions] == [
        ("Annotate", NOT_PLACED_ANNOTATION),
        ("Event", "Warning", reason),
        ("Log", "warning"),
    ]
    event = plan.actions[1]
    assert isinstance(event, RecordEvent) and event.message.startswith(starts), event.message
    annotate = plan.actions[0]
    assert isinstance(annotate, Annotate)
    assert annotate.annotations[NOT_PLACED_ANNOTATION] == f"{reason}: {event.message}"
    assert plan.outcome == RequeueAfter(15.0)
    assert plan.held == f"{reason}|{event.message}"


def test_told_once_per_reason() -> None:
    s = needing(snapshot(job(), worker("w1")), (SETTINGS, None))
    first = decide(s)
    again = decide(dataclasses.replace(s, held=first.held))
    assert again.actions == () and again.held == first.held
    other = needing(snapshot(job(), worker("w1")), (CREDS, None))
    assert "RecordEvent" in kinds_of(decide(dataclasses.replace(other, held=first.held)))


def test_proceeds_once_it_exists_copied_before_its_mirror() -> None:
    s = needing(snapshot(job(), worker("w1")), (SETTINGS, PRESENT), (OPTIONAL, None))
    plan = decide(s)
    assert kinds_of(plan) == ["Place", "CopyDependencies", "CreateMirror", "RecordEvent"]
    [copy] = copies(plan)
    # The optional one that is missing is fine, and not copied.
    assert copy == CopyDependencies("w1", "team-a", (SETTINGS,))
    assert plan.held is None


def test_the_managers_caches_not_listed_is_a_retry() -> None:
    s = needing(snapshot(job(), worker("w1")), (SETTINGS, None), dependencies_listed=False)
    assert isinstance(decide(s).outcome, Retry)


def test_nothing_referenced_is_nothing_to_do() -> None:
    plan = decide(needing(snapshot(job(), worker("w1"))))
    assert kinds_of(plan) == ["Place", "CreateMirror", "RecordEvent"]


def test_an_existing_current_copy_is_not_copied_again() -> None:
    current = Copy("c-1", PRESENT.digest, frozenset())
    w1 = dataclasses.replace(worker("w1"), copies={"configmap/settings": current})
    plan = decide(needing(snapshot(job(), w1), (SETTINGS, PRESENT)))
    assert "CopyDependencies" not in kinds_of(plan)
    assert "CreateMirror" in kinds_of(plan)


def test_placed_with_no_mirror_is_held_again_when_one_went_missing() -> None:
    s = needing(snapshot(job(placed="w1", history=("w1",)), worker("w1"), fresh=True),
                (SETTINGS, None))  # fmt: skip
    plan = decide(s)
    # Placed already: told by an Event; the not-placed annotation is for unplaced ones.
    assert [summary(a) for a in plan.actions] == [
        ("Event", "Warning", "MissingDependency"),
        ("Log", "warning"),
    ]
    assert not any(isinstance(a, CreateMirror) for a in plan.actions)


# -- while its mirror runs ----------------------------------------------------------------


def _running(copy: Copy | None) -> Snapshot:
    obj = job(placed="w1", history=("w1",))
    w1 = worker("w1", mirror=mirror(obj, uid="m-1"))
    if copy is not None:
        w1 = dataclasses.replace(w1, copies={"configmap/settings": copy})
    return needing(snapshot(obj, w1), (SETTINGS, PRESENT))


@pytest.mark.parametrize(
    ("copy", "synced"),
    [
        (None, True),  # deleted behind jobrelay's back: made again
        (Copy("c-1", "old", frozenset({"m-1"})), True),  # edited on the manager
        (Copy("c-1", PRESENT.digest, frozenset()), False),  # current: shared as it is
        (Copy("c-1", PRESENT.digest, frozenset({"m-0"})), False),  # another's mirror's: too
    ],
)
def test_its_copies_follow_the_manager_never_rewritten_for_one_more_mirror(
    copy: Copy | None, synced: bool
) -> None:
    plan = decide(_running(copy))
    found = copies(plan)
    if not synced:
        assert found == []
        return
    [action] = found
    assert action.dependencies == (SETTINGS,)


def test_a_source_gone_while_it_runs_leaves_the_run_alone() -> None:
    obj = job(placed="w1", history=("w1",))
    s = needing(snapshot(obj, worker("w1", mirror=mirror(obj, uid="m-1"))), (SETTINGS, None))
    plan = decide(s)
    assert copies(plan) == []
    assert not any(isinstance(a, RecordEvent) and a.type == "Warning" for a in plan.actions)


# -- someone else's object of that name -----------------------------------------------------


def _foreign(w: WorkerSnapshot) -> WorkerSnapshot:
    return dataclasses.replace(w, foreign_dependencies=("configmap/settings",))


def test_a_worker_holding_a_foreign_one_is_not_chosen() -> None:
    s = needing(snapshot(job(), _foreign(worker("w1")), worker("w2", load=5)), (SETTINGS, PRESENT))
    plan = decide(s)
    assert summary(plan.actions[0]) == ("Place", "w2", "10")


def test_placed_where_a_foreign_one_is_found_goes_elsewhere() -> None:
    obj = job(placed="w1", history=("w1",))
    s = needing(
        snapshot(obj, _foreign(worker("w1")), worker("w2"), fresh=True), (SETTINGS, PRESENT)
    )
    plan = decide(s)
    assert [summary(a) for a in plan.actions] == [
        ("Event", "Warning", "ForeignDependency"),
        ("Log", "warning"),
        ("Place", "w2", "10"),
    ]
    event = plan.actions[0]
    assert isinstance(event, RecordEvent)
    assert event.message.startswith(
        "worker cluster w1: configmap/settings in team-a was not made by jobrelay"
    )
    place = plan.actions[2]
    assert isinstance(place, Place) and place.history == ("w2",)  # no run began on w1


def test_placed_where_a_foreign_one_is_found_and_nowhere_else_is_held() -> None:
    obj = job(placed="w1", history=("w1",))
    s = needing(snapshot(obj, _foreign(worker("w1")), fresh=True), (SETTINGS, PRESENT))
    plan = decide(s)
    event = next(a for a in plan.actions if isinstance(a, RecordEvent))
    assert event.reason == "NotPlaced"
    assert "w1: configmap/settings in team-a was not made by jobrelay" in event.message
    assert not any(isinstance(a, (CreateMirror, CopyDependencies)) for a in plan.actions)


# -- properties ----------------------------------------------------------------------------

_names = st.sampled_from(["a", "b", "settings"])
_deps = st.builds(
    Dependency, st.sampled_from(["configmap", "secret", "serviceaccount"]), _names, st.booleans()
)
_sources = st.none() | st.builds(
    Source, st.just("u"), st.sampled_from(["d1", "d2"]), st.sampled_from([1, MAX_CONTENT_BYTES + 1]),
    st.sampled_from(["", "Opaque", "kubernetes.io/service-account-token"]),
)  # fmt: skip


@given(needed=st.lists(st.tuples(_deps, _sources), max_size=5, unique_by=lambda t: str(t[0])))
def test_nothing_unreferenced_or_refused_is_ever_copied_and_no_mirror_without_them(
    needed: list[tuple[Dependency, Source | None]],
) -> None:
    plan = decide(needing(snapshot(job(), worker("w1")), *needed))
    copied = {d for action in copies(plan) for d in action.dependencies}
    referenced = {d for d, _ in needed}
    assert copied <= referenced

    def refused(dependency: Dependency, source: Source) -> bool:
        token = dependency.kind == "secret" and source.type == TOKEN.type
        return token or source.size > MAX_CONTENT_BYTES

    for dependency, source in needed:
        if dependency in copied:
            assert source is not None and not refused(dependency, source)
    creates = [i for i, a in enumerate(plan.actions) if isinstance(a, CreateMirror)]
    blocked = any(
        (source is None and not dependency.optional)
        or (source is not None and refused(dependency, source))
        for dependency, source in needed
    )
    assert bool(creates) != blocked
    if creates and copied:
        first_copy = next(i for i, a in enumerate(plan.actions) if isinstance(a, CopyDependencies))
        assert first_copy < creates[0]


def test_a_copy_comes_after_its_running_mirrors_status_and_never_over_a_foreign_one() -> None:
    """A workload that ran before its objects were copied (a worker where someone made
    them by hand): its status is copied first, and a foreign one is not tried again."""
    obj = job(placed="w1", history=("w1",))
    running = mirror(obj, uid="m-1", status={"active": 1, "startTime": "2026-03-01T12:00:00Z"})
    s = needing(snapshot(obj, worker("w1", mirror=running)), (SETTINGS, PRESENT), (CREDS, PRESENT))
    plan = decide(s)
    assert kinds_of(plan)[-1] == "CopyDependencies"
    assert "WriteStatus" in kinds_of(plan)
    w1 = _foreign(worker("w1", mirror=running))
    plan = decide(needing(snapshot(obj, w1), (SETTINGS, PRESENT), (CREDS, PRESENT)))
    assert [a.dependencies for a in copies(plan)] == [(CREDS,)]


def test_a_secret_in_a_namespace_not_opened_to_secret_copying_is_held_saying_why() -> None:
    """The controller reads Secrets only where an admin opened the namespace: a workload
    elsewhere that requires one is held (MissingDependency) with what the admin must do;
    an optional one is not copied."""
    s = snapshot(job(), worker("w1"))
    closed = (Needed(CREDS, None, closed=True), Needed(SETTINGS, PRESENT))
    plan = decide(dataclasses.replace(s, dependencies=closed))
    event = plan.actions[1]
    assert isinstance(event, RecordEvent) and event.reason == "MissingDependency"
    assert event.message.startswith("secret/creds cannot be copied: namespace team-a is not "
                                    "opened to Secret copying")  # fmt: skip
    assert "dependencies.secretNamespaces" in event.message
    assert "--dependency-secret-namespaces" in event.message
    optional = Dependency("secret", "extra", optional=True)
    plan = decide(dataclasses.replace(s, dependencies=(Needed(optional, None, closed=True),)))
    assert "MissingDependency" not in [getattr(a, "reason", None) for a in plan.actions]
