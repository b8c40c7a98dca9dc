"""A manager ResourceQuota counted against the namespace's admitted delegated workloads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import entry

from jobrelay.admission.namespace_quota import (
    EXCEEDS_NAMESPACE_QUOTA,
    NAMESPACE_QUOTA_EXCEEDED,
    NamespaceLimits,
    quota_verdict,
    read_hard,
)
from jobrelay.admission.queue_model import Entry


def test_reading_hard_values() -> None:
    limits = read_hard(
        {"requests.cpu": "2", "memory": "4Gi", "limits.cpu": "4", "count/jobs.batch": "3",
         "pods": "10", "requests.storage": "1Ti", "requests.nvidia.com/gpu": 1,
         "requests.ephemeral-storage": "10Gi"},
        {"cpu": "1500m", "count/jobs.batch": "5"},  # a second quota: the lower value holds
    )  # fmt: skip
    assert limits.requests == {
        "cpu": 1500, "memory": 4 * 2**30, "nvidia.com/gpu": 1, "ephemeral-storage": 10 * 2**30,
    }  # fmt: skip
    assert limits.limits == {"cpu": 4000}
    assert limits.jobs == 3 and limits.problems == ()


def test_unreadable_hard_values_are_left_out_and_said() -> None:
    limits = read_hard({"requests.cpu": "lots", "requests.memory": "-1", "limits.cpu": "2"})
    assert limits.requests == {} and limits.limits == {"cpu": 2000}
    assert len(limits.problems) == 2
    assert "requests.cpu: 'lots' is left out" in limits.problems[0]


def ns(name: str, cpu: str, **kwargs: object) -> Entry:
    return entry(name, "q", cpu=cpu, namespace="lab", **kwargs)  # type: ignore[arg-type]


CASES = [
    ("room left", {"requests.cpu": "2"}, [ns("a", "1")], ns("b", "1"), None),
    ("would exceed now", {"requests.cpu": "2"}, [ns("a", "1.5")], ns("b", "1"),
     NAMESPACE_QUOTA_EXCEEDED),
    ("never, even alone", {"requests.cpu": "2"}, [], ns("b", "10"), EXCEEDS_NAMESPACE_QUOTA),
    ("never is said before not now", {"requests.cpu": "2", "requests.memory": "1Gi"},
     [ns("a", "2")], ns("b", "1", memory="2Gi"), EXCEEDS_NAMESPACE_QUOTA),
    ("plain cpu means requests", {"cpu": "2"}, [ns("a", "2")], ns("b", "1"),
     NAMESPACE_QUOTA_EXCEEDED),
    ("limits count limits", {"limits.cpu": "3"}, [ns("a", "1", limits={"cpu": "2"})],
     ns("b", "1", limits={"cpu": "2"}), NAMESPACE_QUOTA_EXCEEDED),
    ("no limits set: limits not counted", {"limits.cpu": "3"}, [ns("a", "1")], ns("b", "1"),
     None),
    ("Jobs counted", {"count/jobs.batch": "1"}, [ns("a", "1")], ns("b", "1"),
     NAMESPACE_QUOTA_EXCEEDED),
    ("other kinds are not Jobs", {"count/jobs.batch": "1"}, [ns("a", "1")],
     ns("b", "1", kind="JobSet"), None),
    ("no Jobs at all", {"count/jobs.batch": "0"}, [], ns("b", "1"), EXCEEDS_NAMESPACE_QUOTA),
    ("itself among the admitted is not counted twice", {"requests.cpu": "2"},
     [ns("b", "2")], ns("b", "2"), None),
    ("no quota", {}, [ns("a", "100")], ns("b", "100"), None),
    ("resources the quota does not name", {"requests.memory": "1Gi"}, [ns("a", "100")],
     ns("b", "100"), None),
]  # fmt: skip


@pytest.mark.parametrize(("hard", "admitted", "candidate", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_quota_verdict(hard: dict, admitted: list, candidate: Entry, reason: str | None) -> None:
    verdict = quota_verdict(hard, admitted, candidate)
    assert (verdict and verdict.reason) == reason
    assert quota_verdict(read_hard(hard), admitted, candidate) == verdict


def test_the_messages_give_the_numbers() -> None:
    now = quota_verdict({"requests.cpu": "2"}, [ns("a", "1500m")], ns("b", "1"))
    assert now is not None
    assert now.message.startswith("namespace lab: 2500m of 2 cpu requests")
    never = quota_verdict({"requests.cpu": "2"}, [], ns("b", "10"))
    assert never is not None and "it requests 10 cpu" in never.message
    assert "requests.cpu: 2" in never.message


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 8), st.lists(st.integers(1, 4), max_size=30))
def test_admitting_by_the_verdict_never_exceeds_the_hard_value(hard_cpu: int, asks: list) -> None:
    limits = NamespaceLimits(requests={"cpu": hard_cpu * 1000})
    admitted: list[Entry] = []
    for n, cpu in enumerate(asks):
        candidate = ns(f"e{n}", str(cpu))
        verdict = quota_verdict(limits, admitted, candidate)
        if verdict is None:
            admitted.append(candidate)
        elif cpu > hard_cpu:
            assert verdict.reason == EXCEEDS_NAMESPACE_QUOTA
        else:
            assert verdict.reason == NAMESPACE_QUOTA_EXCEEDED
    assert sum(e.requests["cpu"] for e in admitted) <= hard_cpu * 1000
