"""The chaos test's judge, on hand-made histories: it must see each kind of wrong, and
nothing in a right one. Pure and fast: part of ``make test`` (not marked chaos)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    ORIGIN_UID_LABEL,
    PLACEMENTS_ANNOTATION,
    RUN_ANNOTATION,
)
from tests.chaos.verdicts import (
    POD_JOB_UID_LABEL,
    Deletion,
    Expected,
    Rework,
    Run,
    Seen,
    disagreements,
    format_indexes,
    handovers,
    holders_between,
    outcome_problems,
    parse_indexes,
    ran_at_once,
    regressions,
    rework,
    runs_of,
    shown_when_unwatched,
)

Obj = dict[str, Any]
PARALLEL = Expected(
    "p", "parallel", completions=4, parallelism=2, backoff_limit=2, duration_s=1, fails=False
)
INDEXED = Expected(
    "i", "indexed", completions=3, parallelism=3, backoff_limit=2, duration_s=1, fails=False
)
FAILING = Expected(
    "f", "single", completions=1, parallelism=1, backoff_limit=2, duration_s=1, fails=True
)


def job(placements: str = "w1", rv: int = 1, **status: Any) -> Obj:
    return {
        "metadata": {
            "uid": "job",
            "resourceVersion": str(rv),
            "annotations": {PLACEMENTS_ANNOTATION: placements},
        },
        "status": status,
    }


def ended(kind: str, reason: str) -> list[Obj]:
    target = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
    return [
        {"type": target, "status": "True", "reason": reason},
        {"type": kind, "status": "True", "reason": reason},
    ]


def mirror(uid: str, run: int = 1, carry: Obj | None = None, **status: Any) -> Obj:
    notes = {RUN_ANNOTATION: str(run)}
    if carry:
        notes[CARRIED_OVER_ANNOTATION] = json.dumps(carry)
    return {
        "metadata": {"uid": uid, "labels": {ORIGIN_UID_LABEL: "job"}, "annotations": notes},
        "status": status,
    }


def run_of(worker: str, obj: Obj, at: float = 0.0, *, deleted: bool = False) -> Run:
    number = int(obj["metadata"]["annotations"][RUN_ANNOTATION])
    versions = [Seen("ADDED", obj, at)] + ([Seen("DELETED", obj, at + 1)] if deleted else [])
    return Run(worker, obj["metadata"]["uid"], number, versions)


def pod(mirror_uid: str, uid: str, phase: str) -> Obj:
    return {
        "metadata": {"uid": uid, "labels": {POD_JOB_UID_LABEL: mirror_uid}},
        "status": {"phase": phase},
    }


@given(st.sets(st.integers(min_value=0, max_value=40)))
def test_index_notation_round_trips(indexes: set[int]) -> None:
    assert parse_indexes(format_indexes(indexes)) == indexes


def test_index_notation_reads_the_job_api_form() -> None:
    assert parse_indexes("0-2,5") == {0, 1, 2, 5}
    assert format_indexes({5, 0, 2, 1}) == "0-2,5"


def test_a_history_that_only_grows_has_no_regression() -> None:
    history = [
        job(rv=1),
        job(rv=2, startTime="T1", active=2),
        job(rv=3, startTime="T1", succeeded=1, failed=1, completedIndexes="1"),
        job("w1,w2", rv=4, startTime="T1", succeeded=3, failed=1, completedIndexes="0-2"),
        job(
            "w1,w2",
            rv=5,
            startTime="T1",
            succeeded=3,
            failed=1,
            completedIndexes="0-2",
            conditions=ended("Complete", "CompletionsReached"),
        ),
    ]
    assert regressions(history) == []


def test_each_kind_of_going_backwards_is_seen() -> None:
    history = [
        job(
            "w1,w2",
            rv=1,
            startTime="T1",
            succeeded=2,
            failed=2,
            completedIndexes="0-1",
            conditions=ended("Failed", "BackoffLimitExceeded"),
        ),
        job("w3", rv=2, startTime="T2", succeeded=1, failed=2, completedIndexes="1"),
    ]
    problems = regressions(history)
    assert any("succeeded went from 2 to 1" in p for p in problems), problems
    assert any("completedIndexes lost 0" in p for p in problems), problems
    assert any("Failed=True went away" in p for p in problems), problems
    assert any("FailureTarget=True went away" in p for p in problems), problems
    assert any("startTime changed from T1 to T2" in p for p in problems), problems
    assert any("placements went from ['w1', 'w2'] to ['w3']" in p for p in problems), problems


def test_runs_are_ordered_by_number_then_first_sight_and_get_their_pods() -> None:
    first, again, moved = mirror("m1"), mirror("m2"), mirror("m3", run=2)
    runs = runs_of(
        "job",
        {
            "w1": [Seen("ADDED", again, 5.0), Seen("ADDED", first, 1.0)],
            "w2": [Seen("ADDED", moved, 3.0), Seen("ADDED", mirror("x") | {"metadata": {}}, 0)],
        },
        {"w1": [Seen("ADDED", pod("m2", "p1", "Running"), 6.0)]},
    )
    assert [(run.worker, run.uid) for run in runs] == [("w1", "m1"), ("w1", "m2"), ("w2", "m3")]
    assert list(runs[1].pods) == ["p1"]


def test_management_must_equal_what_the_last_run_carried_plus_what_it_counted() -> None:
    runs = [
        run_of("w1", mirror("m1", succeeded=1, failed=1), deleted=True),
        run_of(
            "w1",
            mirror(
                "m2",
                carry={"succeeded": 1, "failed": 1},
                succeeded=3,
                conditions=ended("Complete", "CompletionsReached"),
            ),
        ),
    ]
    right = job(succeeded=4, failed=1, conditions=ended("Complete", "CompletionsReached"))
    assert disagreements(right, PARALLEL, runs, lost="w9") == []
    wrong = job(succeeded=4, failed=2, conditions=ended("Complete", "CompletionsReached"))
    assert any("failed=2" in p for p in disagreements(wrong, PARALLEL, runs, lost="w9"))


def test_a_carry_that_invents_work_or_forgets_it_disagrees() -> None:
    for carry in ({"succeeded": 3}, {}):
        runs = [
            run_of("w1", mirror("m1", run=1, carry={"succeeded": 1}, succeeded=1)),
            run_of(
                "w2",
                mirror(
                    "m2",
                    run=2,
                    carry=carry,
                    succeeded=4 - carry.get("succeeded", 0),
                    conditions=ended("Complete", "CompletionsReached"),
                ),
            ),
        ]
        final = job("w1,w2", succeeded=4, conditions=ended("Complete", "CompletionsReached"))
        problems = disagreements(final, PARALLEL, runs, lost="w9")
        assert any("run 2 (w2) carried" in p for p in problems), (carry, problems)


def test_indexes_are_a_union_and_the_placements_must_match_the_runs() -> None:
    runs = [
        run_of("w1", mirror("m1", completedIndexes="0")),
        run_of(
            "w2",
            mirror(
                "m2",
                run=2,
                carry={"completedIndexes": "0"},
                completedIndexes="1-2",
                succeeded=2,
                conditions=ended("Complete", "CompletionsReached"),
            ),
        ),
    ]
    final = job(
        "w1,w2",
        succeeded=3,
        completedIndexes="0-2",
        conditions=ended("Complete", "CompletionsReached"),
    )
    assert disagreements(final, INDEXED, runs, lost="w9") == []
    misplaced = job("w1,w3", **final["status"])
    assert any("run 2 on w2" in p for p in disagreements(misplaced, INDEXED, runs, lost="w9"))


def test_a_last_run_on_the_lost_worker_is_judged_within_bounds() -> None:
    runs = [run_of("lost", mirror("m1", succeeded=3, failed=1))]  # seen after the thaw
    final = job("lost", succeeded=1, failed=3, conditions=ended("Failed", "BackoffLimitExceeded"))
    assert any("not between" in p for p in disagreements(final, PARALLEL, runs, lost="lost"))
    within = job("lost", succeeded=1, failed=1, conditions=ended("Failed", "DeadlineExceeded"))
    assert disagreements(within, PARALLEL, runs, lost="lost") == []
    assert disagreements(within, PARALLEL, runs, lost="w9") != []  # elsewhere: exact


def test_outcomes() -> None:
    complete = job(
        succeeded=4,
        startTime="T1",
        completionTime="T2",
        conditions=ended("Complete", "CompletionsReached"),
    )
    assert outcome_problems(complete, PARALLEL) == []
    assert outcome_problems(complete | {"status": {**complete["status"], "succeeded": 5}}, PARALLEL)
    failed = job(failed=3, startTime="T1", conditions=ended("Failed", "BackoffLimitExceeded"))
    assert outcome_problems(failed, FAILING) == []
    too_many = job(failed=4, startTime="T1", conditions=ended("Failed", "BackoffLimitExceeded"))
    assert any("one pod at a time" in p for p in outcome_problems(too_many, FAILING))
    running = job(failed=3, active=1, conditions=ended("Failed", "BackoffLimitExceeded"))
    assert {"no startTime", "finished with pods shown running"} <= set(
        outcome_problems(running, FAILING)
    )


def test_rework_counts_successes_beyond_completions_but_not_those_no_status_counted() -> None:
    deleted = run_of("w1", mirror("m1", succeeded=1), deleted=True)
    deleted.pods = {f"p{i}": [Seen("MODIFIED", pod("m1", f"p{i}", "Succeeded"), 1)] for i in "ab"}
    last = run_of("w1", mirror("m2", carry={"succeeded": 1}, succeeded=3))
    last.pods = {f"q{i}": [Seen("MODIFIED", pod("m2", f"q{i}", "Succeeded"), 2)] for i in "abc"}
    assert rework(PARALLEL, [deleted, last], lost="w9", deleted={"m1": None}).extra == 0
    assert rework(PARALLEL, [deleted, last], lost="w9", deleted={"m1": None}).uncountable == 1
    assert rework(PARALLEL, [deleted, last], lost="w9", deleted={}).extra == 1
    # A run on the lost worker the Job moved away from does not count.
    assert rework(PARALLEL, [deleted, last], lost="w1", deleted={}).extra == 0


def lease_held(holder: str, at: float) -> Seen:
    return Seen("MODIFIED", {"spec": {"holderIdentity": holder}}, at)


def test_holders_between_include_the_one_holding_at_the_start() -> None:
    lease = [lease_held("a", 1), lease_held("", 4), lease_held("b", 6), lease_held("c", 9)]
    assert holders_between(lease, 2, 8) == {"a", "b"}
    assert holders_between(lease, 5, 8) == {"b"}  # released: nobody held it at 5
    assert holders_between(lease, 0, 20) == {"a", "b", "c"}


def test_a_deletion_only_watched_leaders_acted_on_must_count_its_last_status() -> None:
    # The mirror counted 2 successes; the management Job showed 1 of them at the deletion.
    gone = run_of("w1", mirror("m1", succeeded=2), at=1.0, deleted=True)
    gone.pods = {f"p{i}": [Seen("MODIFIED", pod("m1", f"p{i}", "Succeeded"), 1)] for i in "ab"}
    again = run_of("w1", mirror("m2", carry={"succeeded": 1}, succeeded=3), at=8.0)
    again.pods = {f"q{i}": [Seen("MODIFIED", pod("m2", f"q{i}", "Succeeded"), 9)] for i in "abc"}
    job_versions = [
        Seen("MODIFIED", job(succeeded=1, active=1), 2.0),
        Seen("MODIFIED", job(succeeded=3), 9),
    ]
    lease = [lease_held("a", 0.5), lease_held("b", 6.0)]
    watched = Deletion(at=3.0, watchers=frozenset({"a", "b"}))
    assert shown_when_unwatched(gone, again, watched, lease, job_versions) is None
    assert rework(PARALLEL, [gone, again], lost="w9", deleted={"m1": None}).extra == 1
    # b started after the deletion (or had not listed yet) and acted: what the Job showed.
    unwatched = Deletion(at=3.0, watchers=frozenset({"a"}))
    shown = shown_when_unwatched(gone, again, unwatched, lease, job_versions)
    assert shown == 1
    assert rework(PARALLEL, [gone, again], lost="w9", deleted={"m1": shown}) == Rework(0, 1)
    # The Lease still named a killed holder at the deletion: it never acted again.
    after_kill = [lease_held("k", 0.5), lease_held("b", 6.0)]
    seen_by_b = Deletion(at=3.0, watchers=frozenset({"b"}), killed=frozenset({"k"}))
    assert shown_when_unwatched(gone, again, seen_by_b, after_kill, job_versions) is None
    # a acted (the Job shown with nothing running) before b took the Lease.
    acted = [*job_versions[:1], Seen("MODIFIED", job(succeeded=1), 5.0), *job_versions[1:]]
    assert shown_when_unwatched(gone, again, unwatched, lease, acted) is None
    # b only led after the next run was made: a, who watched, made it.
    late = [lease_held("a", 0.5), lease_held("b", 8.5)]
    assert shown_when_unwatched(gone, again, unwatched, late, job_versions) is None


def test_pods_on_two_workers_at_once_are_seen() -> None:
    a = run_of("w1", mirror("m1"))
    a.pods = {
        "p": [
            Seen("ADDED", pod("m1", "p", "Running"), 1.0),
            Seen("MODIFIED", pod("m1", "p", "Succeeded"), 5.0),
        ]
    }
    b = run_of("w2", mirror("m2", run=2))
    b.pods = {"q": [Seen("ADDED", pod("m2", "q", "Pending"), 4.0)]}
    assert ran_at_once([a, b]) == [("w1", "w2")]
    b.pods = {"q": [Seen("ADDED", pod("m2", "q", "Pending"), 5.5)]}
    assert ran_at_once([a, b]) == []
    same = run_of("w1", mirror("m3"))
    same.pods = {"r": [Seen("ADDED", pod("m3", "r", "Running"), 2.0)]}
    assert ran_at_once([a, same]) == []  # one worker: not two at once


def test_handovers_follow_the_holder_and_skip_a_release() -> None:
    def lease(holder: str, acquired: str, renewed: str, at: float) -> Seen:
        spec = {"holderIdentity": holder, "acquireTime": acquired, "renewTime": renewed}
        return Seen("MODIFIED", {"spec": spec}, at)

    found = handovers(
        [
            lease("a", "2025-01-01T00:00:00.000000Z", "2025-01-01T00:00:04.000000Z", 1),
            lease("b", "2025-01-01T00:00:10.500000Z", "2025-01-01T00:00:10.500000Z", 2),
            lease("", "2025-01-01T00:00:10.500000Z", "2025-01-01T00:00:20.000000Z", 3),
            lease("c", "2025-01-01T00:00:21.000000Z", "2025-01-01T00:00:21.000000Z", 4),
        ]
    )
    assert [(h.old, h.new) for h in found] == [("a", "b"), ("b", "c")]
    assert found[0].gap == 6.5
    assert found[1].gap == 10.5  # from b's last renewal the watch saw
