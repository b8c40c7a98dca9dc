"""Cordon, drain and remove decisions (pure): tables for each rule, properties over all states."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.fleet.maintenance_rules import (
    CleanupResult,
    DrainMode,
    Removal,
    RemovalPhase,
    WorkerClusterView,
    cleanup_message,
    cordon_message,
    decide_removal,
    drain_interrupted_message,
    drain_patch,
    drain_progress,
    drain_started_message,
    drain_target,
    drain_timeout_message,
    forced_removal_message,
    leftover_command,
    removal_interrupted_message,
    state_summary,
    uncordon_message,
    uncordon_patch,
)
from jobrelay.vocabulary.names import mirror_selector

LOST = "2026-01-01T00:00:00Z"

states = st.builds(
    WorkerClusterView,
    name=st.sampled_from(["w1", "gpu-east"]),
    cordoned=st.booleans(),
    drain=st.none() | st.sampled_from(DrainMode),
    active_mirrors=st.none() | st.integers(min_value=0, max_value=500),
    connected=st.sampled_from(["True", "False", "Unknown"]),
    connected_reason=st.sampled_from(["", "Timeout", "Unreachable"]),
    lost_time=st.none() | st.just(LOST),
    generation=st.none() | st.integers(min_value=1, max_value=5),
    observed_generation=st.none() | st.integers(min_value=1, max_value=5),
)


# -- reading a WorkerCluster ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"metadata": {"name": "w1"}}, WorkerClusterView("w1")),
        (
            {
                "metadata": {"name": "w1", "generation": 3},
                "spec": {"cordoned": True, "drain": "All"},
                "status": {
                    "activeMirrors": 0,
                    "lostTime": LOST,
                    "observedGeneration": 2,
                    "conditions": [
                        {"type": "Other", "status": "True"},
                        {"type": "Connected", "status": "False", "reason": "Timeout",
                         "message": "no answer in time"},
                    ],
                },
            },
            WorkerClusterView("w1", True, DrainMode.ALL, 0, "False", "Timeout", "no answer in time",
                        LOST, 3, 2),
        ),
        # Not what the CRD allows, yet read without a crash: as not draining, count unknown.
        ({"metadata": {"name": "w1"}, "spec": {"drain": "Sometimes"},
          "status": {"activeMirrors": "3"}}, WorkerClusterView("w1")),
    ],
)  # fmt: skip
def test_worker_state_of(obj: dict[str, Any], expected: WorkerClusterView) -> None:
    assert WorkerClusterView.of(obj) == expected


# -- the patches ------------------------------------------------------------------------------


def test_a_drain_cordons_and_an_uncordon_deletes_the_drain() -> None:
    assert drain_patch(DrainMode.NOT_STARTED) == {"spec": {"cordoned": True, "drain": "NotStarted"}}
    assert uncordon_patch() == {"spec": {"cordoned": False, "drain": None}}


# -- cordon, uncordon, drain target -----------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (WorkerClusterView("w1"), "worker cluster w1 cordoned: no new workloads"),
        (WorkerClusterView("w1", cordoned=True), "worker cluster w1 was already cordoned: nothing changed"),
        (WorkerClusterView("w1", cordoned=True, drain=DrainMode.ALL),
         "worker cluster w1 was already cordoned and draining (All): nothing changed"),
    ],
)  # fmt: skip
def test_cordon_message(before: WorkerClusterView, expected: str) -> None:
    assert cordon_message(before).startswith(expected)


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (WorkerClusterView("w1"), "worker cluster w1 was not cordoned: nothing changed"),
        (WorkerClusterView("w1", cordoned=True), "worker cluster w1 uncordoned: it takes new workloads again"),
        (WorkerClusterView("w1", cordoned=True, drain=DrainMode.NOT_STARTED),
         "worker cluster w1 uncordoned and its drain (NotStarted) cancelled"),
    ],
)  # fmt: skip
def test_uncordon_message(before: WorkerClusterView, expected: str) -> None:
    assert uncordon_message(before).startswith(expected)


@pytest.mark.parametrize(
    ("current", "force", "expected"),
    [
        (None, False, DrainMode.NOT_STARTED),
        (None, True, DrainMode.ALL),
        (DrainMode.NOT_STARTED, False, DrainMode.NOT_STARTED),
        (DrainMode.NOT_STARTED, True, DrainMode.ALL),
        (DrainMode.ALL, False, DrainMode.ALL),
        (DrainMode.ALL, True, DrainMode.ALL),
    ],
)
def test_drain_target_never_weakens_a_drain(
    current: DrainMode | None, force: bool, expected: DrainMode
) -> None:
    assert drain_target(WorkerClusterView("w1", drain=current), force=force) is expected


@pytest.mark.parametrize(
    ("current", "mode", "expected"),
    [
        (None, DrainMode.NOT_STARTED, "worker cluster w1 cordoned and draining (NotStarted): "
         "workloads whose mirror has not started move to other workers; running ones finish here"),
        (None, DrainMode.ALL, "worker cluster w1 cordoned and draining (All): every unfinished "
         "workload moves to another worker, counters carried over"),
        (DrainMode.NOT_STARTED, DrainMode.ALL, "worker cluster w1 now draining (All, was NotStarted)"),
        (DrainMode.ALL, DrainMode.ALL, "worker cluster w1 was already draining (All)"),
    ],
)  # fmt: skip
def test_drain_started_message(current: DrainMode | None, mode: DrainMode, expected: str) -> None:
    assert drain_started_message(WorkerClusterView("w1", drain=current), mode).startswith(expected)


# -- drain progress ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "since", "done", "line"),
    [
        (WorkerClusterView("w1", active_mirrors=0), None, True,
         "worker cluster w1 is drained: no unfinished mirrors remain"),
        (WorkerClusterView("w1", active_mirrors=1, connected="True"), None, False,
         "worker cluster w1: 1 unfinished mirror left"),
        (WorkerClusterView("w1", active_mirrors=5, connected="False", connected_reason="Unreachable"),
         None, False, "worker cluster w1: 5 unfinished mirrors left (not connected: Unreachable; "
         "the count is from its last contact)"),
        (WorkerClusterView("w1", active_mirrors=5, connected="False", lost_time=LOST), None, False,
         f"worker cluster w1: 5 unfinished mirrors left (declared lost at {LOST}; the count is "
         "from its last contact)"),
        (WorkerClusterView("w1"), None, False, "worker cluster w1: no mirror count yet "
         "(status.activeMirrors is unset: is the controller, `jobrelay run`, running?)"),
        # The controller reports the generation it acted on: a 0 from before the drain is old.
        (WorkerClusterView("w1", active_mirrors=0, observed_generation=1), 2, False,
         "worker cluster w1: waiting for the controller to see the drain"),
        (WorkerClusterView("w1", active_mirrors=0, observed_generation=2), 2, True,
         "worker cluster w1 is drained: no unfinished mirrors remain"),
    ],
)  # fmt: skip
def test_drain_progress(state: WorkerClusterView, since: int | None, done: bool, line: str) -> None:
    progress = drain_progress(state, since_generation=since)
    assert (progress.done, progress.line) == (done, line)


@given(states, st.none() | st.integers(min_value=1, max_value=5))
def test_drained_exactly_when_no_unfinished_mirror_is_left_and_the_drain_was_seen(
    state: WorkerClusterView, since: int | None
) -> None:
    seen = since is None or state.observed_generation is None or state.observed_generation >= since
    progress = drain_progress(state, since_generation=since)
    assert progress.done == (state.active_mirrors == 0 and seen)
    assert state.name in progress.line


@pytest.mark.parametrize("mode", list(DrainMode))
def test_drain_timeout_and_interrupt_say_the_drain_stays_and_what_to_run(mode: DrainMode) -> None:
    timeout = drain_timeout_message(WorkerClusterView("w1", active_mirrors=2), mode, 30)
    assert timeout.startswith(
        f"worker cluster w1 still has 2 unfinished mirrors after 30s; the drain ({mode}) stays"
    )
    assert "`jobrelay clusters drain w1` to wait again" in timeout
    assert "`jobrelay clusters uncordon w1` to cancel it" in timeout
    # --force is offered only when it would change something.
    assert ("drain w1 --force" in timeout) == (mode is DrainMode.NOT_STARTED)
    interrupted = drain_interrupted_message("w1", mode)
    assert f"stays cordoned and draining ({mode})" in interrupted
    assert "`jobrelay clusters drain w1` waits again" in interrupted


def test_drain_timeout_without_a_count_asks_for_the_controller() -> None:
    message = drain_timeout_message(WorkerClusterView("w1"), DrainMode.ALL, 1.5)
    assert "an unknown number of unfinished mirrors (no status.activeMirrors" in message
    assert "after 1.5s" in message


# -- remove -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "removal", "in_message"),
    [
        (WorkerClusterView("w1", active_mirrors=0), Removal.REMOVE, "no unfinished mirrors, removing it"),
        (WorkerClusterView("w1", active_mirrors=0, cordoned=True, drain=DrainMode.NOT_STARTED),
         Removal.REMOVE, "drained, removing it"),
        # A stale 0 of a lost worker is still 0: its clean-up decides (unreachable: refused).
        (WorkerClusterView("w1", active_mirrors=0, lost_time=LOST), Removal.REMOVE, "removing it"),
        (WorkerClusterView("w1", active_mirrors=3), Removal.REFUSE,
         "has 3 unfinished mirrors: run `jobrelay clusters drain w1`"),
        (WorkerClusterView("w1"), Removal.REFUSE, "the controller never reported them"),
        (WorkerClusterView("w1", active_mirrors=1, drain=DrainMode.ALL), Removal.REFUSE,
         "is draining (All) but still has 1 unfinished mirror"),
        (WorkerClusterView("w1", active_mirrors=2, lost_time=LOST), Removal.REFUSE,
         f"was declared lost at {LOST}"),
    ],
)  # fmt: skip
def test_decide_removal(state: WorkerClusterView, removal: Removal, in_message: str) -> None:
    decision = decide_removal(state, force=False)
    assert decision.removal is removal
    assert in_message in decision.message


@given(states, st.booleans())
def test_removal_needs_no_unfinished_mirror_or_force(state: WorkerClusterView, force: bool) -> None:
    decision = decide_removal(state, force=force)
    if force:
        assert decision.removal is Removal.DRAIN_ALL_FIRST
    elif state.active_mirrors == 0:
        assert decision.removal is Removal.REMOVE
    else:
        assert decision.removal is Removal.REFUSE
        # A refusal says what to run next, and that --force exists.
        assert f"jobrelay clusters remove {state.name} --force" in decision.message
    assert state.name in decision.message


def test_forced_removal_after_timeout_says_it_goes_ahead() -> None:
    assert forced_removal_message(WorkerClusterView("w1", active_mirrors=2), 300) == (
        "worker cluster w1 still has 2 unfinished mirrors after 300s of draining; removing it "
        "anyway (--force): its mirrors are deleted and the controller re-dispatches the "
        "workloads of a removed worker"
    )


@pytest.mark.parametrize(
    ("phase", "force", "expected"),
    [
        (RemovalPhase.CHECKING, False, "interrupted: nothing changed on worker cluster w1"),
        (RemovalPhase.DRAINING, True, "interrupted: nothing removed; worker cluster w1 stays "
         "cordoned and draining (All) and the controller carries on; `jobrelay clusters remove "
         "w1 --force` resumes, `jobrelay clusters uncordon w1` cancels the drain"),
        (RemovalPhase.CLEANING, False, "interrupted while deleting the mirrors left on worker "
         "cluster w1: it stays registered and cordoned; `jobrelay clusters remove w1` finishes"),
        (RemovalPhase.UNREGISTERING, True, "interrupted while deleting worker cluster w1's "
         "WorkerCluster and Secret: `jobrelay clusters remove w1 --force` finishes"),
    ],
)  # fmt: skip
def test_removal_interrupted_message(phase: RemovalPhase, force: bool, expected: str) -> None:
    assert removal_interrupted_message("w1", phase, force=force).startswith(expected)


# -- leaving no mirror behind -------------------------------------------------------------------


def test_mirror_selector_and_leftover_command_use_the_controllers_label_and_origin() -> None:
    assert (
        mirror_selector("example.com/relay", "hq")
        == "jobrelay.dev/mirror=example.com.relay,jobrelay.dev/origin=hq"
    )
    assert leftover_command(["Job.v1.batch", "RayJob.v1.ray.io"], "jobrelay.dev/relay", "hq") == (
        "kubectl --kubeconfig WORKER-KUBECONFIG delete Job.v1.batch,RayJob.v1.ray.io "
        "--all-namespaces -l jobrelay.dev/mirror=jobrelay.dev.relay,jobrelay.dev/origin=hq"
    )


KINDS = ["Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io"]


@pytest.mark.parametrize(
    ("result", "force", "expected"),
    [
        (CleanupResult({"Job.v1.batch": 2, "JobSet.v1alpha2.jobset.x-k8s.io": 1}), False,
         "worker cluster w1: deleted 2 Job.v1.batch, 1 JobSet.v1alpha2.jobset.x-k8s.io mirror(s)"),
        (CleanupResult({"Job.v1.batch": 0}, ("JobSet.v1alpha2.jobset.x-k8s.io",)), False,
         "worker cluster w1: no mirrors left to delete (not served there, so none: "
         "JobSet.v1alpha2.jobset.x-k8s.io)"),
        (CleanupResult({"Job.v1.batch": 1}, (), "Timeout: no answer in time"), True,
         "worker cluster w1: deleted 1 Job.v1.batch mirror(s), then cannot delete its mirrors "
         "(Timeout: no answer in time), so some may remain. Removing it anyway (--force); once "
         "it answers, delete them with:\n  kubectl --kubeconfig WORKER-KUBECONFIG delete "
         "Job.v1.batch,JobSet.v1alpha2.jobset.x-k8s.io --all-namespaces "
         "-l jobrelay.dev/mirror=jobrelay.dev.relay"),
        (CleanupResult({}, (), "Unreachable: cannot connect"), False,
         "worker cluster w1: cannot delete its mirrors (Unreachable: cannot connect), so some "
         "may remain: nothing was removed and it stays cordoned. Fix the connection or "
         "credentials (`jobrelay clusters list` shows why) and run `jobrelay clusters remove "
         "w1` again, or `jobrelay clusters remove w1 --force` to remove it anyway and delete "
         "what remains later with:\n  kubectl"),
    ],
)  # fmt: skip
def test_cleanup_message(result: CleanupResult, force: bool, expected: str) -> None:
    message = cleanup_message(
        "w1", result, kind_names=KINDS, controller_name="jobrelay.dev/relay", origin="hq",
        force=force,
    )  # fmt: skip
    assert message.startswith(expected)


# -- jobrelay clusters list ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (WorkerClusterView("w1"), "Schedulable"),
        (WorkerClusterView("w1", cordoned=True), "Cordoned"),
        (WorkerClusterView("w1", cordoned=True, drain=DrainMode.NOT_STARTED), "Draining(NotStarted)"),
        (WorkerClusterView("w1", lost_time=LOST), "Lost"),
        (WorkerClusterView("w1", cordoned=True, lost_time=LOST), "Lost,Cordoned"),
        (WorkerClusterView("w1", cordoned=True, drain=DrainMode.ALL, lost_time=LOST), "Lost,Draining(All)"),
    ],
)  # fmt: skip
def test_state_summary(state: WorkerClusterView, expected: str) -> None:
    assert state_summary(state) == expected
