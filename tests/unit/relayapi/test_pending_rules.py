"""The visibility view: a namespace's waiting workloads from the last admission plan."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.relayapi.test_handler import (
    CONTROLLER,
    ORIGIN,
    PROXY,
    Manager,
    Objects,
    Pool,
    Runtime,
    request,
)

from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.queue_model import QueueHold
from jobrelay.admission.shares import QueueFigures
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.httpserver import Answer
from jobrelay.relayapi.pending_rules import (
    match_pending_route,
    pending_path,
    pending_rows,
    pending_workloads_body,
)
from jobrelay.relayapi.route_rules import API_PATH, Limits

WAITS = QueueHold("QueueNominalQuotaExceeded", "gpu: 4 of nominal 4 nvidia.com/gpu")


def _plan(*entries: tuple[str, str, int], told: dict[str, QueueHold] | None = None,
          figures: dict[str, QueueFigures] | None = None) -> AdmissionPlan:  # fmt: skip
    """A plan holding ``entries`` (entry key, queue, position)."""
    return AdmissionPlan(
        holding={key: WAITS for key, _, _ in entries},
        positions={key: position for key, _, position in entries},
        queue_of={key: queue for key, queue, _ in entries},
        told=told or {},
        figures=figures or {},
    )


@pytest.mark.parametrize(
    ("path", "namespace"),
    [
        (f"{API_PATH}/namespaces/team-a/pendingworkloads", "team-a"),
        (f"{API_PATH}/namespaces/team-a/pendingworkloads/", "team-a"),
        (f"{API_PATH}/namespaces/Team/pendingworkloads", None),
        (f"{API_PATH}/pendingworkloads", None),
        (f"{API_PATH}/namespaces/team-a/jobs/x/pendingworkloads", None),
        (f"{API_PATH}/namespaces/team-a/workloads", None),
    ],
)
def test_route(path: str, namespace: str | None) -> None:
    assert match_pending_route(path) == namespace
    if namespace:
        assert match_pending_route(pending_path(namespace)) == namespace


@pytest.mark.parametrize(
    ("entries", "kinds", "expected"),
    [
        # Two of another namespace ahead: third, two ahead not shown.
        ([("Job other/a", "gpu", 1), ("Job other/b", "gpu", 2), ("Job team-a/c", "gpu", 3)],
         {"Job"}, [("c", "gpu", 3, 2)]),
        # Its own are shown, not counted as hidden.
        ([("Job team-a/a", "gpu", 1), ("Job team-a/b", "gpu", 2)],
         {"Job"}, [("a", "gpu", 1, 0), ("b", "gpu", 2, 0)]),
        # A kind it may not list: counted, not shown.
        ([("JobSet team-a/a", "gpu", 1), ("Job team-a/b", "gpu", 2)],
         {"Job"}, [("b", "gpu", 2, 1)]),
        # Another queue's are not ahead of it.
        ([("Job other/a", "cpu", 1), ("Job team-a/b", "gpu", 1)],
         {"Job"}, [("b", "gpu", 1, 0)]),
        ([("Job other/a", "gpu", 1)], {"Job"}, []),
    ],
)  # fmt: skip
def test_rows(entries: list[tuple[str, str, int]], kinds: set[str],
              expected: list[tuple[str, str, int, int]]) -> None:  # fmt: skip
    rows = pending_rows(_plan(*entries), "team-a", kinds)
    assert [(r.name, r.queue, r.position, r.ahead_not_shown) for r in rows] == expected
    assert all(r.reason == WAITS.reason for r in rows)


def test_no_plan_yet() -> None:
    body = pending_workloads_body(None, "team-a", {"Job"}, [])
    assert body["planned"] is False and body["items"] == [] and body["total"] == 0


def test_told_holds_and_messages_name_no_other_namespace() -> None:
    behind = QueueHold("QueuedBehind", "gpu: behind Job other/secret (the queue is StrictFIFO)")
    own = QueueHold("QueuedBehind", "gpu: behind Job team-a/mine (the queue is StrictFIFO)")
    quota = QueueHold("ExceedsNamespaceQuota", "namespace quota: 2 of 2 count/jobs.batch")
    plan = AdmissionPlan(
        holding={"Job team-a/b": behind, "Job team-a/c": own},
        positions={"Job other/secret": 1, "Job team-a/b": 3, "Job team-a/c": 4},
        queue_of={"Job team-a/b": "gpu", "Job team-a/c": "gpu", "Job other/secret": "gpu"},
        told={"Job team-a/q": quota},
    )
    rows = {r.name: r for r in pending_rows(plan, "team-a", {"Job"})}
    assert "secret" not in rows["b"].message and "another namespace" in rows["b"].message
    assert "Job team-a/mine" in rows["c"].message
    assert rows["q"].queue == "" and rows["q"].position is None
    assert rows["q"].message == quota.message


def test_body_figures_and_cap() -> None:
    entries = [(f"Job team-a/w{i}", "gpu", i + 1) for i in range(5)]
    queue = {
        "metadata": {"name": "gpu"},
        "spec": {"nominalQuota": {"nvidia.com/gpu": "4"}},
        "status": {"usage": {"nvidia.com/gpu": "4"}, "pending": 9},
    }
    figures = {"gpu": QueueFigures("gpu", 1.0, pending=5, admitted=2)}
    body = pending_workloads_body(_plan(*entries, figures=figures), "team-a", {"Job"},
                                  [queue], limit=3)  # fmt: skip
    assert [item["name"] for item in body["items"]] == ["w0", "w1", "w2"]
    assert body["truncated"] and body["total"] == 5 and "first 3" in body["message"]
    (figure,) = body["queues"]
    assert figure["name"] == "gpu" and figure["pending"] == 5 and figure["admitted"] == 2
    assert figure["nominalQuota"] == {"nvidia.com/gpu": "4"}
    assert figure["usage"] == {"nvidia.com/gpu": "4"}
    json.dumps(body)


_NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
_NAMESPACES = st.sampled_from(["team-a", "other", "third"])
_QUEUES = st.sampled_from(["gpu", "cpu"])


@given(st.dictionaries(st.tuples(_NAMESPACES, _NAMES), _QUEUES, max_size=20))
def test_positions_are_the_plans_and_other_namespaces_are_only_counted(
    workloads: dict[tuple[str, str], str],
) -> None:
    # Positions as the fair order numbers them: 1.. per queue, over every namespace.
    entries, seen = [], {"gpu": 0, "cpu": 0}
    for (namespace, name), queue in sorted(workloads.items()):
        seen[queue] += 1
        entries.append((f"Job {namespace}/{name}-{namespace}", queue, seen[queue]))
    plan = _plan(*entries)
    body = pending_workloads_body(plan, "team-a", {"Job"}, [])
    text = json.dumps(body["items"])
    assert "other" not in text and "third" not in text
    mine = [e for e in entries if e[0].startswith("Job team-a/")]
    assert len(body["items"]) == len(mine)
    for item in body["items"]:
        key = f"Job team-a/{item['name']}"
        assert item["position"] == plan.positions[key]
        # Everything ahead of it is either shown before it or counted as not shown.
        shown_ahead = sum(
            1 for other in body["items"]
            if other["queue"] == item["queue"] and other["position"] < item["position"]
        )  # fmt: skip
        assert shown_ahead + item["aheadNotShown"] == item["position"] - 1


class _Memory:
    def __init__(self, plan: AdmissionPlan | None) -> None:
        self.last = plan


class _Admission:
    def __init__(self, plan: AdmissionPlan | None) -> None:
        self.memory = _Memory(plan)

    def queue_of(self, namespace: str, named: str) -> str:
        return named


async def _answer(plan: AdmissionPlan | None, user: str, namespace: str) -> Answer:
    manager = Manager()
    manager.allowed = {("alice", "team-a", "jobs", "")}
    kinds: dict[str, Any] = {"Job.v1.batch": Runtime(JobKind(), Objects())}
    api = RelayApi(
        manager, Pool(), kinds, Limits(),  # type: ignore[arg-type]
        controller_name=CONTROLLER, origin=ORIGIN, front_proxy=lambda: PROXY,
        admission=_Admission(plan),
    )  # fmt: skip
    answer = await api.handle(request(pending_path(namespace), user=user))
    assert isinstance(answer, Answer)
    return answer


async def test_served_per_namespace_to_who_may_list_there() -> None:
    plan = _plan(("Job other/a", "gpu", 1), ("Job other/b", "gpu", 2), ("Job team-a/c", "gpu", 3))
    answer = await _answer(plan, "alice", "team-a")
    assert answer.code == 200
    body = json.loads(answer.body)
    assert [(i["name"], i["position"], i["aheadNotShown"]) for i in body["items"]] == [("c", 3, 2)]
    refused = await _answer(plan, "alice", "other")
    assert refused.code == 403 and b"cannot list jobs" in refused.body
    assert (await _answer(plan, "mallory", "team-a")).code == 403


_DNS = st.from_regex(r"[a-z0-9][-a-z0-9]{0,10}", fullmatch=True)


@given(_DNS, _DNS, st.sampled_from(["Job", "JobSet", "RayJob"]))
def test_no_message_names_a_workload_of_another_namespace(
    namespace: str, name: str, kind: str
) -> None:
    behind = QueueHold("QueuedBehind", f"gpu: behind {kind} {namespace}/{name} (StrictFIFO)")
    plan = AdmissionPlan(holding={"Job team-a/mine": behind}, positions={"Job team-a/mine": 2},
                         queue_of={"Job team-a/mine": "gpu"})  # fmt: skip
    (row,) = pending_rows(plan, "team-a", {"Job"})
    assert (f"{kind} {namespace}/{name}" in row.message) == (namespace == "team-a")


async def test_a_controller_with_no_plan_says_so() -> None:
    answer = await _answer(None, "alice", "team-a")
    assert answer.code == 200
    body = json.loads(answer.body)
    assert body["planned"] is False and body["items"] == []
