"""A small model of the built-in Job controller, to feed the status translation.

It produces the sequence of statuses a worker's kube-controller-manager
(v1.35, pkg/controller/job/job_controller.go) writes on a mirror: counters
that only grow, finished Pods passing through ``uncountedTerminatedPods``,
completed indexes added as Pods succeed, the interim ``FailureTarget`` /
``SuccessCriteriaMet`` condition before the final ``Failed`` / ``Complete``
once no Pod is left, and the ``Suspended`` condition on suspend and resume.
Which Pod does what next is driven by a list of integers, so Hypothesis can
generate and shrink histories.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from jobrelay.kinds.job import JsonObj

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

# How the worker treats startTime when its mirror is suspended: "none" never
# suspends; "keep" keeps it and resets it on resume (v1.35's built-in
# controller); "clear" clears it on suspend (KEP-5440, later releases).
SuspendStyle = Literal["none", "keep", "clear"]


def ts(seconds: int) -> str:
    """RFC 3339 time ``seconds`` after T0, as the apiserver prints it."""
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class JobShape:
    """The spec fields that change how the built-in controller drives a Job."""

    indexed: bool = False
    completions: int | None = 1
    parallelism: int = 1
    backoff_limit: int = 6
    backoff_limit_per_index: int | None = None
    success_policy_count: int | None = None
    fail_job_on_exit_42: bool = False

    def spec(self) -> JsonObj:
        """The Job spec, defaulted as the apiserver stores it."""
        spec: JsonObj = {
            "parallelism": self.parallelism,
            "backoffLimit": self.backoff_limit,
            "completionMode": "Indexed" if self.indexed else "NonIndexed",
            "suspend": False,
            "podReplacementPolicy": "TerminatingOrFailed",
            "template": {
                "metadata": {"labels": {"app": "sim"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            },
        }
        if self.completions is not None:
            spec["completions"] = self.completions
        if self.backoff_limit_per_index is not None:
            spec["backoffLimitPerIndex"] = self.backoff_limit_per_index
        if self.success_policy_count is not None:
            spec["successPolicy"] = {"rules": [{"succeededCount": self.success_policy_count}]}
        if self.fail_job_on_exit_42:
            spec["podReplacementPolicy"] = "Failed"
            spec["podFailurePolicy"] = {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {"operator": "In", "values": [42]},
                    }
                ]
            }
        return spec


def management_job(
    shape: JobShape, *, suspend: bool = False, status: JsonObj | None = None
) -> JsonObj:
    """A management Job as the manager apiserver returns it."""
    spec = shape.spec()
    spec["managedBy"] = "jobrelay.dev/relay"
    spec["suspend"] = suspend
    job: JsonObj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sim", "namespace": "team-a", "uid": "uid-manager"},
        "spec": spec,
    }
    if status is not None:
        job["status"] = status
    return job


@dataclass
class _Pod:
    uid: str
    index: int | None
    ready: bool = False


@dataclass
class BuiltinJobController:
    """The built-in controller running one mirror; ``history`` holds every mirror it wrote."""

    shape: JobShape
    suspend_style: SuspendStyle = "none"
    clock: int = 0
    suspended: bool = False
    pods: list[_Pod] = field(default_factory=list)
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    uncounted_succeeded: list[str] = field(default_factory=list)
    uncounted_failed: list[str] = field(default_factory=list)
    completed: set[int] = field(default_factory=set)
    failed_indexes: set[int] = field(default_factory=set)
    index_failures: Counter[int] = field(default_factory=Counter)
    conditions: list[JsonObj] = field(default_factory=list)
    start_time: str | None = None
    completion_time: str | None = None
    fatal_failure: bool = False
    finishing: str | None = None  # the final condition type, once the interim one is set
    done: bool = False
    history: list[JsonObj] = field(default_factory=list)
    _next_uid: int = 0

    def __post_init__(self) -> None:
        self.history.append(self._mirror(status_written=False))

    def run(self, choices: list[int]) -> list[JsonObj]:
        """Sync once per choice (stopping when the Job finished); return the history."""
        for choice in choices:
            if self.done:
                break
            self.sync(choice)
        return self.history

    def sync(self, choice: int) -> None:
        """One step: a user's suspend toggle, or one controller sync and its status write."""
        self.clock += 1
        actions = self._actions()
        action = actions[choice % len(actions)]
        if self.finishing is not None:
            self._finish(choice)
        elif self.suspended != self._shows_suspended():
            self._follow_suspend()
        elif action == self._toggle_suspend:
            action(choice)
        else:
            if self.start_time is None and not self.suspended:
                self.start_time = ts(self.clock)
            action(choice)
            if not self.suspended:
                self._evaluate_finished()
        self.history.append(self._mirror(status_written=True))

    # The things that can happen to a running Job.

    def _actions(self) -> list[Callable[[int], None]]:
        actions = [
            self._create_pods,
            self._pod_ready,
            self._pod_succeeds,
            self._pod_fails,
            self._flush_uncounted,
            self._create_pods,
            self._pod_succeeds,
        ]
        if self.shape.fail_job_on_exit_42:
            actions.append(self._pod_fails_with_42)
        if self.suspend_style != "none":
            actions.append(self._toggle_suspend)
        return actions

    def _create_pods(self, _: int) -> None:
        if self.suspended:
            return
        for index in self._indexes_to_start()[: self.shape.parallelism - len(self.pods)]:
            self._next_uid += 1
            self.pods.append(_Pod(uid=f"pod-{self._next_uid}", index=index))

    def _indexes_to_start(self) -> list[int | None]:
        if self.shape.indexed:
            assert self.shape.completions is not None
            running = {p.index for p in self.pods}
            skip = self.completed | self.failed_indexes | running
            return [i for i in range(self.shape.completions) if i not in skip]
        succeeded = self.succeeded + len(self.uncounted_succeeded)
        if self.shape.completions is None:
            return [] if succeeded else [None] * self.shape.parallelism
        return [None] * max(0, self.shape.completions - succeeded - len(self.pods))

    def _pod_ready(self, _: int) -> None:
        waiting = [p for p in self.pods if not p.ready]
        if waiting:
            waiting[0].ready = True

    def _pod_succeeds(self, choice: int) -> None:
        pod = self._take_pod(choice)
        if pod is None:
            return
        if pod.index is None:
            self.uncounted_succeeded.append(pod.uid)
        else:
            # Indexed Jobs count a success by its index, no UID tracking needed.
            self.completed.add(pod.index)

    def _pod_fails(self, choice: int) -> None:
        pod = self._take_pod(choice)
        if pod is None:
            return
        self.uncounted_failed.append(pod.uid)
        limit = self.shape.backoff_limit_per_index
        if limit is not None and pod.index is not None:
            self.index_failures[pod.index] += 1
            if self.index_failures[pod.index] > limit:
                self.failed_indexes.add(pod.index)

    def _pod_fails_with_42(self, choice: int) -> None:
        if self.pods:
            self._pod_fails(choice)
            self.fatal_failure = True

    def _flush_uncounted(self, _: int) -> None:
        self.succeeded += len(self.uncounted_succeeded)
        self.failed += len(self.uncounted_failed)
        self.uncounted_succeeded, self.uncounted_failed = [], []
        self.terminating = 0

    def _toggle_suspend(self, _: int) -> None:
        """The user's spec update; the controller follows on its next sync."""
        self.suspended = not self.suspended

    def _shows_suspended(self) -> bool:
        return any(c["type"] == "Suspended" and c["status"] == "True" for c in self.conditions)

    def _follow_suspend(self) -> None:
        if self.suspended:
            # Pods of a suspended Job are deleted, not counted as failed.
            self.terminating += len(self.pods)
            self.pods = []
            self._set_condition("Suspended", "True", "JobSuspended", "Job suspended")
            if self.suspend_style == "clear":
                self.start_time = None
        else:
            self._set_condition("Suspended", "False", "JobResumed", "Job resumed")
            self.start_time = ts(self.clock)

    def _take_pod(self, choice: int) -> _Pod | None:
        if not self.pods:
            return None
        return self.pods.pop(choice % len(self.pods))

    # Finishing: interim condition first, final one once no Pod is left.

    def _evaluate_finished(self) -> None:
        shape = self.shape
        if self.fatal_failure:
            self._start_finishing(
                "FailureTarget",
                "PodFailurePolicy",
                "Container main for pod team-a/sim exited with 42, matching FailJob rule at index 0",
            )
        elif (
            shape.backoff_limit_per_index is None
            and self.failed + len(self.uncounted_failed) > shape.backoff_limit
        ):
            self._start_finishing(
                "FailureTarget",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        elif (
            self.failed_indexes
            and shape.completions is not None
            and (len(self.failed_indexes) + len(self.completed) >= shape.completions)
        ):
            self._start_finishing("FailureTarget", "FailedIndexes", "Job has failed indexes")
        elif shape.success_policy_count is not None and (
            len(self.completed) >= shape.success_policy_count
        ):
            self._start_finishing("SuccessCriteriaMet", "SuccessPolicy", "Matched rules at index 0")
        elif self._all_completions_done():
            self._start_finishing(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )

    def _all_completions_done(self) -> bool:
        if self.pods:
            return False
        if self.shape.indexed:
            return len(self.completed) >= (self.shape.completions or 0)
        succeeded = self.succeeded + len(self.uncounted_succeeded)
        return succeeded >= (self.shape.completions or 1)

    def _start_finishing(self, interim: str, reason: str, message: str) -> None:
        if interim == "FailureTarget":
            # Pods still running when a Job fails count as failed.
            self.uncounted_failed += [p.uid for p in self.pods]
        self.terminating += len(self.pods)
        self.pods = []
        self.conditions.append(_condition(interim, "True", reason, message, ts(self.clock)))
        self.finishing = "Failed" if interim == "FailureTarget" else "Complete"

    def _finish(self, choice: int) -> None:
        if self.uncounted_succeeded or self.uncounted_failed or self.terminating:
            self._flush_uncounted(choice)
            if choice % 2:
                return
        interim = self.conditions[-1]
        self.conditions.append(
            _condition(
                self.finishing or "",
                "True",
                interim["reason"],
                interim["message"],
                ts(self.clock),
            )
        )
        if self.finishing == "Complete":
            self.completion_time = ts(self.clock)
        self.done = True

    def _set_condition(self, kind: str, status: str, reason: str, message: str) -> None:
        new = _condition(kind, status, reason, message, ts(self.clock))
        for i, existing in enumerate(self.conditions):
            if existing["type"] == kind:
                self.conditions[i] = new
                return
        self.conditions.append(new)

    # What the apiserver returns.

    def _mirror(self, *, status_written: bool) -> JsonObj:
        spec = self.shape.spec()
        spec["suspend"] = self.suspended
        mirror: JsonObj = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sim", "namespace": "team-a", "uid": "uid-worker"},
            "spec": spec,
        }
        if status_written:
            mirror["status"] = self._status()
        return mirror

    def _status(self) -> JsonObj:
        status: JsonObj = {
            "active": len(self.pods),
            "ready": sum(p.ready for p in self.pods),
            "terminating": self.terminating,
            "succeeded": len(self.completed) if self.shape.indexed else self.succeeded,
            "failed": self.failed,
            "uncountedTerminatedPods": {
                "succeeded": list(self.uncounted_succeeded),
                "failed": list(self.uncounted_failed),
            },
            "conditions": copy.deepcopy(self.conditions),
            "startTime": self.start_time,
            "completionTime": self.completion_time,
        }
        if self.shape.indexed:
            status["completedIndexes"] = _intervals(self.completed)
        if self.shape.backoff_limit_per_index is not None:
            status["failedIndexes"] = _intervals(self.failed_indexes)
        return omit_empty(status)


def omit_empty(status: JsonObj) -> JsonObj:
    """What the apiserver stores of a status: no nulls, no zero or empty omitempty fields."""
    result: JsonObj = {}
    for key, value in status.items():
        if value is None:
            continue
        if key in ("active", "succeeded", "failed", "completedIndexes", "conditions") and not value:
            continue
        if key == "uncountedTerminatedPods":
            value = {kind: uids for kind, uids in value.items() if uids}
        result[key] = value
    return result


def comparable(status: JsonObj) -> JsonObj:
    """A status with conditions in type order, for comparing statuses field by field."""
    result = omit_empty(status)
    if "conditions" in result:
        result["conditions"] = sorted(result["conditions"], key=lambda c: c["type"])
    if not result.get("uncountedTerminatedPods"):
        result.pop("uncountedTerminatedPods", None)
    return result


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> JsonObj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def _intervals(indexes: set[int]) -> str:
    """Indexes as the built-in controller prints them, written independently of jobrelay's."""
    items: list[str] = []
    for i in sorted(indexes):
        if items and i - 1 in indexes:
            first = items[-1].split("-")[0]
            items[-1] = f"{first}-{i}"
        else:
            items.append(str(i))
    return ",".join(items)
