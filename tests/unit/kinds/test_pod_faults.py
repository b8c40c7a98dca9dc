"""Which pod failures are the worker's (move the workload) and which are the workload's own."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.pod_faults import FAULT_TEXT_LIMIT, worker_fault


def waiting(reason: str, message: str = "", *, init: bool = False) -> dict[str, Any]:
    field = "initContainerStatuses" if init else "containerStatuses"
    state = {"waiting": {"reason": reason, "message": message}}
    return {"status": {"phase": "Pending", field: [{"name": "main", "state": state}]}}


def disrupted(reason: str, phase: str = "Running") -> dict[str, Any]:
    condition = {"type": "DisruptionTarget", "status": "True", "reason": reason}
    return {"status": {"phase": phase, "conditions": [condition]}}


@pytest.mark.parametrize(
    ("pod", "starts_with"),
    [
        (waiting("ErrImagePull", "pull access denied"), "ErrImagePull (container main): pull"),
        (waiting("ImagePullBackOff"), "ImagePullBackOff (container main)"),
        (waiting("InvalidImageName", init=True), "InvalidImageName"),
        (waiting("CreateContainerConfigError", "secret x not found"), "CreateContainerConfigError"),
        (disrupted("DeletionByTaintManager"), "DeletionByTaintManager"),
        (disrupted("EvictionByEvictionAPI", "Failed"), "EvictionByEvictionAPI"),
        ({"status": {"phase": "Failed", "reason": "Evicted", "message": "low"}}, "Evicted: low"),
    ],
)
def test_worker_side_faults_are_named(pod: dict[str, Any], starts_with: str) -> None:
    found = worker_fault(pod)
    assert found is not None and found.startswith(starts_with), found


@pytest.mark.parametrize(
    "pod",
    [
        {},
        {"status": {"phase": "Running"}},
        waiting("ContainerCreating"),
        waiting("CrashLoopBackOff"),  # the workload's own container exits
        {"status": {"phase": "Failed", "reason": "DeadlineExceeded"}},
        {"status": {"phase": "Running", "reason": "Evicted"}},  # not finished: not evicted
        {"status": {"phase": "Failed", "conditions": [{"type": "DisruptionTarget",
                                                      "status": "False"}]}},
        {"status": "garbage"},
        {"status": {"containerStatuses": ["not", "a", "mapping"]}},
    ],
)  # fmt: skip
def test_the_workload_s_own_failures_and_normal_states_are_none(pod: dict[str, Any]) -> None:
    assert worker_fault(pod) is None


@given(st.text(max_size=5000), st.text(max_size=5000))
def test_what_a_worker_writes_is_bounded(message: str, name: str) -> None:
    pod = waiting("ErrImagePull", message)
    pod["status"]["containerStatuses"][0]["name"] = name
    found = worker_fault(pod)
    assert found is not None
    assert len(found) <= len("ErrImagePull (container ): ") + 2 * FAULT_TEXT_LIMIT
    assert "\n" not in found
