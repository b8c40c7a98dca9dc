"""The APIService and the Service that `jobrelay run --api-register` writes."""

from __future__ import annotations

import base64

from jobrelay.relayapi.registration_rules import (
    API_SERVICE_NAME,
    api_service,
    external_service,
    service_host,
)

CA = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"


def test_the_api_service_names_the_group_version_service_and_ca() -> None:
    registration = api_service("jobrelay-system", "jobrelay-api", 40123, CA)
    assert API_SERVICE_NAME == "v1alpha1.api.jobrelay.dev"
    assert registration["metadata"]["name"] == API_SERVICE_NAME
    spec = registration["spec"]
    assert (spec["group"], spec["version"]) == ("api.jobrelay.dev", "v1alpha1")
    assert spec["service"] == {"namespace": "jobrelay-system", "name": "jobrelay-api",
                               "port": 40123}  # fmt: skip
    assert base64.b64decode(spec["caBundle"]).decode() == CA
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (100, 100)
    assert "insecureSkipTLSVerify" not in spec


def test_the_service_sends_the_aggregator_to_the_host() -> None:
    service = external_service("jobrelay-system", "localhost", 40123)
    assert service["metadata"] == {
        "name": "jobrelay-api", "namespace": "jobrelay-system",
        "labels": {"app.kubernetes.io/name": "jobrelay", "app.kubernetes.io/component": "api"},
    }  # fmt: skip
    assert service["spec"]["type"] == "ExternalName"
    assert service["spec"]["externalName"] == "localhost"
    assert service["spec"]["ports"][0]["port"] == 40123
    assert service_host("jobrelay-system") == "jobrelay-api.jobrelay-system.svc"
