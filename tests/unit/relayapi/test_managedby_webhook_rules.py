"""The managedBy defaulting webhook's rules: what it patches, what it answers, how it is
registered (relayapi/managedby_webhook_rules.py)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds import kinds_from_names
from jobrelay.kinds.managed_by_claims import MULTIKUEUE
from jobrelay.relayapi.managedby_webhook_rules import (
    MAX_REVIEW_BYTES,
    NAMESPACE_WEBHOOK,
    QUEUED_WEBHOOK,
    RELAY_LABEL,
    SCHEMA_DEFAULTS,
    WEBHOOK_CONFIGURATION,
    WITHOUT_MANAGED_BY,
    ManagedByDefault,
    admission_answer,
    managed_by_default,
    managed_by_patch,
    url_client_config,
    webhook_configuration,
)

RELAY = "jobrelay.dev/relay"
JOB = ManagedByDefault("batch", "v1", "jobs", ("spec", "managedBy"), RELAY)
PYTORCH = ManagedByDefault(
    "kubeflow.org", "v1", "pytorchjobs", ("spec", "runPolicy", "managedBy"), RELAY
)
RAYJOB = ManagedByDefault("ray.io", "v1", "rayjobs", ("spec", "managedBy"), MULTIKUEUE)
[TRAINJOB] = [
    managed_by_default(kind, MULTIKUEUE)
    for kind in kinds_from_names(["TrainJob.v1alpha1.trainer.kubeflow.org"])
]
TRAINER_OWN = "trainer.kubeflow.org/trainjob-controller"  # what its CRD schema defaults
DEFAULTS = (JOB, PYTORCH, RAYJOB, TRAINJOB)


def review(obj: Any, *, resource: tuple[str, str] = ("batch", "jobs"), **request: Any) -> bytes:
    group, plural = resource
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": "CREATE",
            "resource": {"group": group, "version": "v1", "resource": plural},
            "object": obj,
            **request,
        },
    }
    return json.dumps(body).encode()


def apply_adds(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """``patch`` (JSONPatch "add" or "replace" operations, as the webhook writes) applied
    to a copy."""
    result = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] in ("add", "replace")
        steps = [s.replace("~1", "/").replace("~0", "~") for s in op["path"].split("/")[1:]]
        node = result
        for step in steps[:-1]:
            node = node[step]
        node[steps[-1]] = op["value"]
    return result


def answered(body: bytes) -> tuple[int, dict[str, Any]]:
    code, answer = admission_answer(body, DEFAULTS)
    return code, json.loads(answer)


def patched(obj: dict[str, Any], resource: tuple[str, str] = ("batch", "jobs")) -> dict[str, Any]:
    """``obj`` as the apiserver stores it after the webhook's answer."""
    code, answer = answered(review(obj, resource=resource))
    assert code == 200
    response = answer["response"]
    assert response["allowed"] is True and response["uid"] == "u-1"
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    return apply_adds(obj, patch)


def job(spec: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if spec is not None:
        obj["spec"] = spec
    return obj


@pytest.mark.parametrize(
    ("obj", "resource", "field", "expected"),
    [
        (job({"parallelism": 1}), ("batch", "jobs"), ("spec", "managedBy"), RELAY),
        (job(), ("batch", "jobs"), ("spec", "managedBy"), RELAY),
        (job({}, {"jobrelay.dev/queue": "team-a"}), ("batch", "jobs"), ("spec", "managedBy"), RELAY),
        (job({}, {RELAY_LABEL: "enabled"}), ("batch", "jobs"), ("spec", "managedBy"), RELAY),
        # Kubeflow's jobs keep it in their run policy, made when missing.
        (job({}), ("kubeflow.org", "pytorchjobs"), ("spec", "runPolicy", "managedBy"), RELAY),
        (job({"runPolicy": {"backoffLimit": 2}}), ("kubeflow.org", "pytorchjobs"),
         ("spec", "runPolicy", "managedBy"), RELAY),
        (job({"runPolicy": None}), ("kubeflow.org", "pytorchjobs"),
         ("spec", "runPolicy", "managedBy"), RELAY),
        # Ray's borrowed value, as --kind RayJob.v1.ray.io=kueue.x-k8s.io/multikueue gives it.
        (job({"entrypoint": "x"}), ("ray.io", "rayjobs"), ("spec", "managedBy"), MULTIKUEUE),
        # TrainJob's CRD schema writes its own controller before admission: no choice of
        # the tenant's, replaced as if absent.
        (job({"managedBy": TRAINER_OWN}), ("trainer.kubeflow.org", "trainjobs"),
         ("spec", "managedBy"), MULTIKUEUE),
        (job({}), ("trainer.kubeflow.org", "trainjobs"), ("spec", "managedBy"), MULTIKUEUE),
    ],
)  # fmt: skip
def test_a_workload_without_managed_by_gets_its_kinds_value(
    obj: dict[str, Any], resource: tuple[str, str], field: tuple[str, ...], expected: str
) -> None:
    result = patched(obj, resource)
    value: Any = result
    for step in field:
        value = value[step]
    assert value == expected
    # Nothing else changes.
    assert result["metadata"] == obj["metadata"]
    assert {k: v for k, v in result["spec"].items() if k != field[1]} == {
        k: v for k, v in (obj.get("spec") or {}).items() if k != field[1]
    }


@pytest.mark.parametrize(
    ("obj", "resource"),
    [
        (job({"managedBy": "kueue.x-k8s.io/multikueue"}), ("batch", "jobs")),
        (job({"managedBy": "kubernetes.io/job-controller"}), ("batch", "jobs")),
        (job({"managedBy": RELAY}), ("batch", "jobs")),
        (job({}, {RELAY_LABEL: "disabled"}), ("batch", "jobs")),
        (job({}, {RELAY_LABEL: "disabled", "jobrelay.dev/queue": "q"}), ("batch", "jobs")),
        (job({"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}),
         ("kubeflow.org", "pytorchjobs")),
        # A schema's default is one only for its own kind.
        (job({"managedBy": TRAINER_OWN}), ("batch", "jobs")),
        (job({"managedBy": MULTIKUEUE}), ("trainer.kubeflow.org", "trainjobs")),
        (job({"managedBy": TRAINER_OWN}, {RELAY_LABEL: "disabled"}),
         ("trainer.kubeflow.org", "trainjobs")),
        # Not an object where the field goes: left to the apiserver's validation.
        (job({"runPolicy": "x"}), ("kubeflow.org", "pytorchjobs")),
        (job("nonsense"), ("batch", "jobs")),  # type: ignore[arg-type]
        # A kind the controller does not run.
        (job({}), ("batch", "cronjobs")),
        (job({}), ("apps", "deployments")),
    ],
)  # fmt: skip
def test_what_it_never_touches(obj: dict[str, Any], resource: tuple[str, str]) -> None:
    assert patched(obj, resource) == obj


@pytest.mark.parametrize(
    "request_fields",
    [{"operation": "UPDATE"}, {"operation": "DELETE"}, {"subResource": "status"}],
)
def test_only_a_create_of_the_object_itself_is_defaulted(request_fields: dict[str, Any]) -> None:
    code, answer = answered(review(job({}), **request_fields))
    assert code == 200 and answer["response"] == {"uid": "u-1", "allowed": True}


def test_a_dry_run_create_is_defaulted_alike() -> None:
    code, answer = answered(review(job({}), dryRun=True))
    assert code == 200 and "patch" in answer["response"]


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"", 400, "not JSON"),
        (b"{", 400, "not JSON"),
        (b"\xff\xfe", 400, "not JSON"),
        (b"[" * 100_000, 400, "not JSON"),
        (b"[]", 400, "not an AdmissionReview"),
        (b'{"kind": "Pod"}', 400, "not an AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1"}', 400, "only"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', 400, "uid"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}',
         400, "uid"),
        (b" " * (MAX_REVIEW_BYTES + 1), 413, "at most"),
    ],
)  # fmt: skip
def test_what_is_not_a_review_is_a_status(body: bytes, code: int, words: str) -> None:
    got, answer = admission_answer(body, DEFAULTS)
    status = json.loads(answer)
    assert got == code and status["kind"] == "Status" and status["code"] == code
    assert words in status["message"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    spec=st.dictionaries(st.sampled_from(["managedBy", "runPolicy", "x"]), _json, max_size=3),
    labels=st.dictionaries(
        st.sampled_from([RELAY_LABEL, "jobrelay.dev/queue", "a"]),
        st.sampled_from(["enabled", "disabled", "team-a"]),
        max_size=3,
    ),
    default=st.sampled_from(DEFAULTS),
)
def test_a_patch_sets_only_the_field_and_only_when_absent(
    spec: dict[str, Any], labels: dict[str, str], default: ManagedByDefault
) -> None:
    obj = job(spec, labels)
    patch = managed_by_patch(obj, default)
    if not patch:
        return
    assert labels.get(RELAY_LABEL) != "disabled"
    result = apply_adds(obj, patch)
    value: Any = result
    for step in default.field:
        value = value[step]
    assert value == default.value
    # What was there stays (the field's missing or null parent is what the patch adds).
    assert result["metadata"] == obj["metadata"]
    assert {k: v for k, v in result["spec"].items() if k != default.field[1]} == {
        k: v for k, v in spec.items() if k != default.field[1]
    }


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_body_gets_an_answer_never_an_exception(body: bytes) -> None:
    code, answer = admission_answer(body, DEFAULTS)
    assert code in (200, 400) and json.loads(answer)


def test_the_defaults_follow_the_configured_kinds() -> None:
    kinds = kinds_from_names(["Job.v1.batch", "PyTorchJob.v1.kubeflow.org", "RayJob.v1.ray.io"])
    found = {kind.ref.plural: managed_by_default(kind, MULTIKUEUE) for kind in kinds}
    assert found["pytorchjobs"].field == ("spec", "runPolicy", "managedBy")
    assert found["rayjobs"] == RAYJOB
    assert found["jobs"].field == ("spec", "managedBy")


def test_the_configuration_selects_namespaces_and_queued_workloads_never_disabled_ones() -> None:
    config = webhook_configuration(DEFAULTS, url_client_config("127.0.0.1", 40123, "PEM"), "Fail")
    assert config["metadata"]["name"] == WEBHOOK_CONFIGURATION
    namespaces, queued = config["webhooks"]
    assert namespaces["name"] == NAMESPACE_WEBHOOK and queued["name"] == QUEUED_WEBHOOK
    assert namespaces["namespaceSelector"] == {"matchLabels": {RELAY_LABEL: "enabled"}}
    assert "namespaceSelector" not in queued
    disabled = {"key": RELAY_LABEL, "operator": "NotIn", "values": ["disabled"]}
    assert namespaces["objectSelector"]["matchExpressions"] == [disabled]
    assert queued["objectSelector"]["matchExpressions"] == [
        {"key": "jobrelay.dev/queue", "operator": "Exists"}, disabled,
    ]  # fmt: skip
    for webhook in config["webhooks"]:
        assert webhook["clientConfig"] == {
            "url": "https://127.0.0.1:40123/mutate/managedby",
            "caBundle": base64.b64encode(b"PEM").decode(),
        }
        assert webhook["failurePolicy"] == "Fail" and webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["reinvocationPolicy"] == "Never"
        assert webhook["matchPolicy"] == "Equivalent"
        assert webhook["timeoutSeconds"] <= 10
        assert sorted((r["apiGroups"][0], *r["resources"]) for r in webhook["rules"]) == [
            ("batch", "jobs"), ("kubeflow.org", "pytorchjobs"), ("ray.io", "rayjobs"),
            ("trainer.kubeflow.org", "trainjobs"),
        ]  # fmt: skip
        assert all(r["operations"] == ["CREATE"] for r in webhook["rules"])


def test_the_failure_policy_is_fail_or_ignore() -> None:
    client = url_client_config("127.0.0.1", 1, "PEM")
    assert webhook_configuration(DEFAULTS, client, "Ignore")["webhooks"][0]["failurePolicy"] == (
        "Ignore"
    )
    with pytest.raises(ValueError, match="Fail, Ignore"):
        webhook_configuration(DEFAULTS, client, "fail")


def test_the_match_condition_sends_a_schema_default_to_be_replaced() -> None:
    """What the apiserver sends is what the patch may change: every schema default is in
    the condition, guarded so that a workload without spec.managedBy never errs."""
    expression = WITHOUT_MANAGED_BY["expression"]
    for value in SCHEMA_DEFAULTS:
        assert f"'{value}'" in expression
    assert "(has(object.spec.managedBy) && object.spec.managedBy in [" in expression
    assert TRAINJOB.schema_default == TRAINER_OWN and JOB.schema_default is None
