from __future__ import annotations

import pytest

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.placement.selectors import Operator, Requirement, parse_selector
from jobrelay.placement.workload import (
    Choice,
    Invalid,
    NodeAffinity,
    NodeSelectorTerm,
    PodGroup,
    Strategy,
    Taint,
    Toleration,
    pod_group,
    read_choice,
    read_workload,
    untolerated,
)


def test_a_pod_requests_by_the_kubernetes_rule() -> None:
    group = pod_group(
        "main",
        2,
        {
            "containers": [
                {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"resources": {"limits": {"nvidia.com/gpu": "1"}}},
            ],
            # A larger init container raises the pod's request; overhead is added.
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"memory": "64Mi"},
        },
    )
    assert group.requests == {"cpu": 2000, "memory": 2**30 + 64 * 2**20, "nvidia.com/gpu": 1}


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("gpu", "Equal", "present", "NoSchedule"), Taint("gpu", "present"), True),
        (Toleration("gpu", "Equal", "absent", "NoSchedule"), Taint("gpu", "present"), False),
        (Toleration("gpu", "Exists"), Taint("gpu", "x", "NoExecute"), True),
        (Toleration("gpu", "Exists", effect="NoExecute"), Taint("gpu", "x"), False),
        (Toleration("", "Exists"), Taint("anything", "x"), True),
        (Toleration("other", "Exists"), Taint("gpu"), False),
    ],
)
def test_tolerations(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_only_blocking_taints_keep_a_pod_off() -> None:
    soft = Taint("spot", "", "PreferNoSchedule")
    hard = Taint("gpu", "present", "NoSchedule")
    assert untolerated([soft], ()) is None
    assert untolerated([soft, hard], ()) == hard
    assert untolerated([hard], (Toleration("gpu", "Exists"),)) is None


IN = Operator.IN


@pytest.mark.parametrize(
    ("terms", "name", "labels", "matches"),
    [
        (
            (NodeSelectorTerm((Requirement("zone", IN, frozenset({"a"})),)),),
            "n",
            {"zone": "a"},
            True,
        ),
        (
            (NodeSelectorTerm((Requirement("zone", IN, frozenset({"a"})),)),),
            "n",
            {"zone": "b"},
            False,
        ),
        # Terms are ORed; an empty term matches nothing.
        (
            (NodeSelectorTerm(), NodeSelectorTerm((Requirement("x", Operator.EXISTS),))),
            "n",
            {"x": ""},
            True,
        ),
        ((NodeSelectorTerm(),), "n", {}, False),
        (
            (NodeSelectorTerm(fields=(Requirement("metadata.name", IN, frozenset({"n1"})),)),),
            "n1",
            {},
            True,
        ),
        (
            (NodeSelectorTerm(fields=(Requirement("metadata.name", IN, frozenset({"n1"})),)),),
            "n2",
            {},
            False,
        ),
    ],
)
def test_required_node_affinity(
    terms: tuple[NodeSelectorTerm, ...], name: str, labels: dict[str, str], matches: bool
) -> None:
    assert NodeAffinity(terms).matches(name, labels) is matches


def test_a_group_reads_selector_affinity_and_tolerations() -> None:
    group = pod_group(
        "main",
        1,
        {
            "containers": [{}],
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "cores", "operator": "Gt", "values": ["8"]}
                                ]
                            }
                        ]
                    }
                }
            },
        },
    )
    taint = (Taint("gpu", "present"),)
    assert group.allows("n", {"pool": "gpu", "cores": "16"}, taint) is None
    assert group.allows("n", {"pool": "cpu", "cores": "16"}, taint) == "nodeSelector"
    assert group.allows("n", {"pool": "gpu", "cores": "4"}, taint) == "node affinity"
    assert PodGroup("p", 1).allows("n", {}, taint) == "taint gpu=present:NoSchedule"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, Choice()),
        ({"jobrelay.dev/clusters": "b, a,b"}, Choice(clusters=("b", "a"))),
        (
            {"jobrelay.dev/cluster-selector": "region in (west)"},
            Choice(selector=parse_selector("region in (west)")),
        ),
        ({"jobrelay.dev/placement": "ordered"}, Choice(strategy=Strategy.ORDERED)),
        (
            {"jobrelay.dev/clusters": "a,,b"},
            Invalid(
                "annotation jobrelay.dev/clusters: expected cluster names separated by commas, got 'a,,b'"
            ),
        ),
        (
            {"jobrelay.dev/placement": "random"},
            Invalid(
                "annotation jobrelay.dev/placement: expected spread|pack|ordered, got 'random'"
            ),
        ),
        (
            {"jobrelay.dev/cluster-selector": "a in ()"},
            Invalid(
                "annotation jobrelay.dev/cluster-selector: an empty value set '()' selects nothing"
            ),
        ),
    ],
)
def test_annotations(annotations: dict[str, str] | None, expected: Choice | Invalid) -> None:
    assert read_choice(annotations) == expected


def _job(
    parallelism: int, completions: int | None, annotations: dict[str, str]
) -> dict[str, object]:
    spec: dict[str, object] = {
        "parallelism": parallelism,
        "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}},
    }
    if completions is not None:
        spec["completions"] = completions
    return {"metadata": {"annotations": annotations}, "spec": spec}


def test_a_job_asks_for_parallelism_capped_by_completions() -> None:
    workload = read_workload(JobKind(), _job(8, 3, {"jobrelay.dev/placement": "pack"}))
    assert not isinstance(workload, Invalid)
    assert [(g.count, dict(g.requests)) for g in workload.groups] == [(3, {"cpu": 1000})]
    assert workload.choice.strategy is Strategy.PACK
    assert workload.demand == {"cpu": 3000}


def test_a_jobset_asks_for_replicas_times_pods() -> None:
    template = _job(2, None, {})["spec"]
    jobset = {
        "spec": {
            "replicatedJobs": [{"name": "workers", "replicas": 3, "template": {"spec": template}}]
        }
    }
    workload = read_workload(JobSetKind(), jobset)
    assert not isinstance(workload, Invalid)
    assert [(g.name, g.count) for g in workload.groups] == [("workers", 6)]


def test_bad_input_is_returned_not_raised() -> None:
    job = _job(1, None, {})
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"  # type: ignore[index]
    found = read_workload(JobKind(), job)
    assert isinstance(found, Invalid) and "cannot read the pods' requests" in str(found)
    bad_choice = read_workload(JobKind(), _job(1, None, {"jobrelay.dev/placement": "x"}))
    assert isinstance(bad_choice, Invalid)
