"""The chart's managedBy defaulting webhook as `helm template` renders it: the failure
policy from values, the service and CA of the APIService, a rule per kind, the same
selectors as `jobrelay run --api-register` registers, and the same text at every render."""

from __future__ import annotations

import datetime
import subprocess
from typing import Any

import pytest

from jobrelay.kinds import kinds_from_names
from jobrelay.relayapi.managedby_webhook_rules import managed_by_default, webhook_configuration
from jobrelay.web.tls import certificate_authority
from tests.chart_render import CHART, KUBE_VERSION, chart_tools, helm_template_text, render

pytestmark = pytest.mark.integration

# A Secret's certificate and the CA that signed it (source secret needs it).
GIVEN_CA = certificate_authority("operators-ca", datetime.timedelta(days=30))[0].decode()
SECRET_CERTIFICATE = {"api": {"certificate": {"source": "secret", "secretName": "relay-tls",
                                              "caBundle": GIVEN_CA}}}  # fmt: skip
KINDS = [{"name": "Job.v1.batch"}, {"name": "PyTorchJob.v1.kubeflow.org"},
         {"name": "RayJob.v1.ray.io", "managedBy": "kueue.x-k8s.io/multikueue"}]  # fmt: skip


def webhooks(values: dict[str, Any]) -> dict[str, Any]:
    (config,) = [
        doc for doc in render(chart_tools().helm, values)
        if doc["kind"] == "MutatingWebhookConfiguration"
    ]  # fmt: skip
    return config


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_the_failure_policy_comes_from_values(policy: str) -> None:
    config = webhooks({**SECRET_CERTIFICATE, "webhook": {"failurePolicy": policy}})
    assert [w["failurePolicy"] for w in config["webhooks"]] == [policy, policy]


def test_fail_is_the_default_and_the_service_is_the_apis() -> None:
    rendered = render(chart_tools().helm, {"kinds": KINDS})
    (config,) = [d for d in rendered if d["kind"] == "MutatingWebhookConfiguration"]
    (api,) = [d for d in rendered if d["kind"] == "APIService"]
    assert config["metadata"]["name"] == "jobrelay-managedby"
    for webhook in config["webhooks"]:
        assert webhook["failurePolicy"] == "Fail"
        # selfSigned, the default: no caBundle rendered (the controller writes it on both).
        assert webhook["clientConfig"] == {
            "service": {**api["spec"]["service"], "path": "/mutate/managedby"},
        }
        assert "caBundle" not in api["spec"]
    # The webhooks `jobrelay run` registers for the same kinds, but for where they are.
    values = {"Job.v1.batch": "jobrelay.dev/relay", "PyTorchJob.v1.kubeflow.org":
              "jobrelay.dev/relay", "RayJob.v1.ray.io": "kueue.x-k8s.io/multikueue"}  # fmt: skip
    defaults = [managed_by_default(k, values[k.name]) for k in kinds_from_names(list(values))]
    own = webhook_configuration(defaults, {"url": "https://127.0.0.1:1/"}, "Fail")

    def comparable(webhook: dict[str, Any]) -> dict[str, Any]:
        rules = sorted(
            (group, version, resource, tuple(rule["operations"]), rule["scope"])
            for rule in webhook["rules"]
            for group in rule["apiGroups"] for version in rule["apiVersions"]
            for resource in rule["resources"]
        )  # fmt: skip
        return {**webhook, "clientConfig": None, "rules": rules}

    assert [comparable(w) for w in config["webhooks"]] == [comparable(w) for w in own["webhooks"]]


def test_it_goes_with_the_api_and_can_be_left_out() -> None:
    helm = chart_tools().helm
    for values in ({"webhook": {"enabled": False}}, {"api": {"enabled": False}}):
        kinds = {doc["kind"] for doc in render(helm, values)}
        assert "MutatingWebhookConfiguration" not in kinds


def test_two_renders_are_the_same_text() -> None:
    helm = chart_tools().helm
    values = {**SECRET_CERTIFICATE, "kinds": KINDS, "webhook": {"failurePolicy": "Ignore"}}
    assert helm_template_text(helm, values) == helm_template_text(helm, values)


def test_a_failure_policy_of_another_spelling_is_refused() -> None:
    result = subprocess.run(
        [str(chart_tools().helm), "template", "jobrelay", str(CHART), "--kube-version",
         KUBE_VERSION, "--set", "webhook.failurePolicy=fail"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0 and "failurePolicy" in result.stderr
