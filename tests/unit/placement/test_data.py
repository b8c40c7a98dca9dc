"""Data decides the place: the ``data`` filter, its reasons, and how ``place`` explains a
workload whose PersistentVolumeClaims are nowhere (placement/claims.py, filters/data.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.placement.support import cluster, node, pods

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.placement.claims import WorkerClaims, claim_refusal
from jobrelay.placement.decision import place
from jobrelay.placement.filters import FILTERS, DataLocality
from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.placement.workload import Workload, read_workload

NS = "team-a"


def claims(synced: bool = True, unreadable: str | None = None, **phases: str) -> WorkerClaims:
    return WorkerClaims(synced, {NS: dict(phases)} if phases else {}, unreadable)


def mounting(*names: str, namespace: str = NS) -> Workload:
    workload = pods(1, cpu="1")
    return Workload(workload.groups, workload.choice, namespace, names)


# (case, the workload's claims, the worker's claims, why it is refused)
ROWS: list[tuple[str, tuple[str, ...], WorkerClaims | None, str | None]] = [
    ("mounts none: any worker", (), claims(data="Bound"), None),
    ("mounts none, claims unknown: any worker", (), claims(synced=False), None),
    ("mounts none, claims unreadable: any worker", (), claims(unreadable="Forbidden"), None),
    ("not judged (no claims given)", ("data",), None, None),
    ("bound there", ("data",), claims(data="Bound"), None),
    ("absent", ("data",), claims(), "no PersistentVolumeClaim data in team-a"),
    ("another claim there", ("data",), claims(other="Bound"), "no PersistentVolumeClaim data in team-a"),
    ("pending", ("data",), claims(data="Pending"), "PersistentVolumeClaim data in team-a is Pending"),
    ("no phase yet", ("data",), claims(data=""), "PersistentVolumeClaim data in team-a is Pending"),
    ("lost", ("data",), claims(data="Lost"), "PersistentVolumeClaim data in team-a is Lost"),
    ("not listed yet", ("data",), claims(synced=False), NotKnownYet.CLAIMS),
    (
        "unreadable: never placed blind",
        ("data",),
        claims(unreadable="list persistentvolumeclaims: Forbidden"),
        "its PersistentVolumeClaims cannot be read (list persistentvolumeclaims: Forbidden): "
        "jobrelay cannot tell whether PersistentVolumeClaim data in team-a is there",
    ),
    ("every claim bound", ("a", "b"), claims(a="Bound", b="Bound"), None),
    ("the first claim missing says why", ("b", "a", "c"), claims(b="Bound"), "no PersistentVolumeClaim a in team-a"),
    ("the one not bound says why", ("a", "b"), claims(a="Bound", b="Pending"), "PersistentVolumeClaim b in team-a is Pending"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("wanted", "worker", "reason"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_the_data_filter(
    wanted: tuple[str, ...], worker: WorkerClaims | None, reason: str | None
) -> None:
    request = Request(mounting(*wanted))
    assert DataLocality().reject(request, Cluster("w", claims=worker)) == reason


def test_a_claim_in_another_namespace_is_not_the_data() -> None:
    worker = WorkerClaims(True, {"team-b": {"data": "Bound"}})
    assert claim_refusal(NS, ["data"], worker) == "no PersistentVolumeClaim data in team-a"
    assert claim_refusal("team-b", ["data"], worker) is None


def test_data_is_a_filter_that_may_change() -> None:
    # Data may arrive: the workload waits as NotPlaced, never NeverFits.
    assert not DataLocality.permanent
    assert [f.name for f in FILTERS][-2:] == ["data", "fit"]


def test_the_worker_with_the_data_is_chosen_even_when_the_other_is_emptier() -> None:
    busy = node("n", "8", used={"cpu": "7"})
    clusters = [
        cluster("worker-1", node("n"), claims=claims()),
        cluster("worker-2", busy, claims=claims(data="Bound")),
    ]
    decision = place(clusters, mounting("data"))
    assert decision.cluster == "worker-2"
    assert decision.explain() == "worker-1: no PersistentVolumeClaim data in team-a"


def test_no_worker_has_the_data_each_one_explained() -> None:
    clusters = [
        cluster("worker-1", node("n"), claims=claims(data="Pending")),
        cluster("worker-2", node("n"), claims=claims()),
    ]
    decision = place(clusters, mounting("data"))
    assert decision.cluster is None and not decision.never_fits
    assert decision.explain() == (
        "worker-1: PersistentVolumeClaim data in team-a is Pending; "
        "worker-2: no PersistentVolumeClaim data in team-a"
    )
    assert [p.by for p in decision.passed_over] == ["data", "data"]


def test_a_workload_without_claims_ignores_them() -> None:
    clusters = [cluster("worker-1", node("n"), claims=claims(unreadable="Forbidden"))]
    assert place(clusters, pods(1, cpu="1")).cluster == "worker-1"


def _job(volumes: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": NS},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}], "volumes": volumes}}},
    }


@pytest.mark.parametrize(
    ("volumes", "expected"),
    [
        ([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}], ("data",)),
        ([{"name": "d", "emptyDir": {}}], ()),
        ("nonsense", ()),
    ],
)
def test_read_workload_reads_the_claims(volumes: Any, expected: tuple[str, ...]) -> None:
    workload = read_workload(JobKind(), _job(volumes))
    assert isinstance(workload, Workload)
    assert workload.claims == expected and workload.namespace == NS


_phase = st.sampled_from(["Bound", "Pending", "Lost", ""])
_name = st.sampled_from(["a", "b", "c", "data"])


@given(
    st.lists(_name, max_size=3),
    st.dictionaries(st.sampled_from([NS, "team-b"]), st.dictionaries(_name, _phase)),
)
def test_placed_only_where_every_claim_is_bound(
    wanted: list[str], phases: dict[str, dict[str, str]]
) -> None:
    reason = claim_refusal(NS, wanted, WorkerClaims(True, phases))
    bound = {n for n, p in phases.get(NS, {}).items() if p == "Bound"}
    assert (reason is None) == set(wanted).issubset(bound)
    if reason is not None:
        assert reason.endswith(f"in {NS}") or f"in {NS} is " in reason
