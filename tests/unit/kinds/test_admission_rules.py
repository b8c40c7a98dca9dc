"""Probe pods from pod templates, and what the manager's answer to them means."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.placement.admission_probes import (
    ADMISSION_REFUSED,
    ADMISSION_UNCHECKED,
    ALLOWED,
    POD_SECURITY_VIOLATION,
    pod_security_labels,
    probe_pods,
    verdict_of_refusal,
)
from jobrelay.vocabulary.json_types import JsonObj

TEMPLATE: JsonObj = {
    "metadata": {"labels": {"app": "train"}, "annotations": {"a": "b"}},
    "spec": {
        "serviceAccountName": "trainer",
        "serviceAccount": "trainer",
        "priorityClassName": "high",
        "priority": 1000,
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": "busybox", "securityContext": {"privileged": True}}
        ],
    },
}


def test_a_probe_pod_is_the_template_in_the_namespace_less_what_only_workers_may_have() -> None:
    (pod,) = probe_pods([TEMPLATE], "team-a")
    assert pod["metadata"] == {
        "generateName": "jobrelay-admission-probe-",
        "namespace": "team-a",
        "labels": {"app": "train"},
        "annotations": {"a": "b"},
    }
    # The ServiceAccount and the PriorityClass are judged (they must exist on the
    # manager, and the class's ResourceQuota scopes apply); the computed integer is not.
    assert pod["spec"] == {
        "serviceAccountName": "trainer",
        "serviceAccount": "trainer",
        "priorityClassName": "high",
        "restartPolicy": "Never",
        "containers": TEMPLATE["spec"]["containers"],
    }
    assert TEMPLATE["spec"]["serviceAccountName"] == "trainer"  # the input is not changed


def test_every_pod_template_of_a_jobset_is_judged() -> None:
    jobset: JsonObj = {
        "spec": {
            "replicatedJobs": [
                {"name": "leader", "template": {"spec": {"template": TEMPLATE}}},
                {"name": "workers", "template": {"spec": {"template": {"spec": {}}}}},
            ]
        }
    }
    assert len(probe_pods(JobSetKind().pod_templates(jobset), "ns")) == 2
    assert JobKind().pod_templates({"spec": {"template": TEMPLATE}}) == [TEMPLATE]
    assert JobKind().pod_templates({"spec": {}}) == []


@pytest.mark.parametrize(
    ("code", "reason", "message", "expected_reason", "allowed"),
    [
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: violates PodSecurity '
            '"restricted:latest": privileged (container "main" must not set '
            "securityContext.privileged=true)",
            POD_SECURITY_VIOLATION, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: exceeded quota: pods, '
            "requested: pods=1, used: pods=10, limited: pods=10",
            "", True,
        ),
        # A class that only namespaces with a matching quota may use (limitedResources).
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: insufficient quota to match '
            "these scopes: [{PriorityClass In [system-node-critical system-cluster-critical]}]",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods is forbidden: User "system:serviceaccount:jobrelay-system:jobrelay" cannot '
            'create resource "pods" in API group "" in the namespace "team-a"',
            ADMISSION_UNCHECKED, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: maximum cpu usage per '
            "Container is 2, but limit is 4",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-x1y2z" is forbidden: exceeded quota: team.quota-1, '
            "requested: count/pods=1,requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=7, "
            "limited: requests.nvidia.com/gpu=8",
            "", True,
        ),
        # Webhooks and policies may quote a tenant's text: a quota refusal quoted is no quota.
        (
            403, "Forbidden",
            'admission webhook "deny.example.com" denied the request: exceeded quota: pods, '
            "requested: pods=1, used: pods=10, limited: pods=10",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: ValidatingAdmissionPolicy '
            "'deny' with binding 'deny' denied request: exceeded quota: pods, requested: pods=1, "
            "used: pods=10, limited: pods=10",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: exceeded quota: pods, '
            "requested: pods=1, used: pods=10, limited: pods=10\nand some more words",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-abcde" is forbidden: maximum cpu (exceeded quota) '
            "usage per Container is 2, but limit is 4",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods "somebody-else" is forbidden: exceeded quota: pods, requested: pods=1, '
            "used: pods=10, limited: pods=10",
            ADMISSION_REFUSED, False,
        ),
        (
            403, "Forbidden",
            'pods "jobrelay-admission-probe-" is forbidden: error looking up service account '
            'team-a/trainer: serviceaccount "trainer" not found',
            ADMISSION_REFUSED, False,
        ),
        (400, "BadRequest", 'admission webhook "deny.example.com" denied the request', ADMISSION_REFUSED, False),
        (422, "Invalid", 'Pod "x" is invalid: spec.containers: Required value', ADMISSION_REFUSED, False),
    ],
)  # fmt: skip
def test_what_a_refusal_means(
    code: int, reason: str, message: str, expected_reason: str, allowed: bool
) -> None:
    verdict = verdict_of_refusal(code, reason, message)
    assert verdict is not None
    assert verdict.allowed is allowed
    assert verdict.reason == expected_reason
    assert "jobrelay-admission-probe-abcde" not in verdict.message
    if verdict.reason == POD_SECURITY_VIOLATION:
        # Kubernetes' wording is kept: the user sees which rule.
        assert 'violates PodSecurity "restricted:latest": privileged' in verdict.message


@pytest.mark.parametrize(
    ("name", "cause", "says"),
    [
        ("trainer", 'serviceaccount "trainer" not found',
         "its ServiceAccount trainer does not exist in namespace team-a on the management cluster"),
        ("default", 'serviceaccount "default" not found',
         "the namespace team-a has no ServiceAccount default yet"),
        ("trainer", "Get \"https://...\": context deadline exceeded",
         "its ServiceAccount team-a/trainer cannot be looked up: Get"),
    ],
)  # fmt: skip
def test_a_service_account_missing_on_the_manager_is_named(
    name: str, cause: str, says: str
) -> None:
    message = (
        'pods "jobrelay-admission-probe-" is forbidden: error looking up service account '
        f"team-a/{name}: {cause}"
    )
    verdict = verdict_of_refusal(403, "Forbidden", message)
    assert verdict is not None and not verdict.allowed
    assert verdict.reason == ADMISSION_REFUSED
    assert says in verdict.message, verdict.message
    assert verdict.message.startswith("the management cluster refuses this workload's pods")


@pytest.mark.parametrize("code", [0, 500, 503, 504, 429, 409])
def test_answers_that_say_nothing_about_admission_are_asked_again(code: int) -> None:
    assert verdict_of_refusal(code, "Whatever", "the server is busy") is None


def test_only_pod_security_labels_go_to_the_workers() -> None:
    assert pod_security_labels({"pod-security.kubernetes.io/enforce": "baseline", "team": "a"}) == {
        "pod-security.kubernetes.io/enforce": "baseline"
    }
    assert pod_security_labels(None) == {}
    assert ALLOWED.allowed


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=30,
)  # fmt: skip
EXAMPLES = 300


@settings(max_examples=EXAMPLES, derandomize=True)
@given(templates=st.lists(JSON, max_size=3), namespace=st.text(max_size=70))
def test_hostile_templates_never_crash_the_probe_builder(
    templates: list[object], namespace: str
) -> None:
    """Whatever a user wrote where a pod template goes, the probe is a Pod body."""
    dicts = [t for t in templates if isinstance(t, dict)]
    for pod in probe_pods(dicts, namespace):
        assert pod["kind"] == "Pod" and isinstance(pod["spec"], dict)


@settings(max_examples=EXAMPLES, derandomize=True)
@given(code=st.integers(0, 600), reason=st.text(max_size=30), message=st.text(max_size=5000))
def test_any_answer_is_read_without_crashing(code: int, reason: str, message: str) -> None:
    verdict = verdict_of_refusal(code, reason, message)
    if verdict is not None:
        assert len(verdict.message) < 1400  # a worker's novel never reaches an Event whole


QUOTA_WORDS = "exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"


@settings(max_examples=EXAMPLES, derandomize=True)
@given(
    speaker=st.sampled_from(
        [
            'admission webhook "deny.example.com" denied the request: ',
            'pods "jobrelay-admission-probe-abcde" is forbidden: ValidatingAdmissionPolicy '
            "'p' with binding 'b' denied request: ",
            'pods "jobrelay-admission-probe-abcde" is forbidden: ',
        ]
    ),
    before=st.text(max_size=40),
    # Not a continuation of the last quantity: what a policy might add after the words.
    after=st.one_of(
        st.just(""),
        st.sampled_from(" \n;").flatmap(lambda c: st.text(max_size=40).map(lambda t: c + t)),
    ),
)
def test_quoted_quota_words_are_never_an_allowance(speaker: str, before: str, after: str) -> None:
    """Whatever a webhook or a policy says around ResourceQuota's words, it is a refusal;
    only the plugin's own sentence, whole, allows."""
    message = speaker + before + QUOTA_WORDS + after
    verdict = verdict_of_refusal(403, "Forbidden", message)
    assert verdict is not None
    own = speaker.startswith('pods "') and "Validating" not in speaker
    if verdict.allowed:
        assert own and before == "" and after == ""
    if own and before == "" and after == "":
        assert verdict.allowed
