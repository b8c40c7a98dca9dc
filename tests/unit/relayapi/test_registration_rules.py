"""The APIService, Service and EndpointSlice that `jobrelay run --api-register` writes."""

from __future__ import annotations

import base64

import pytest

from jobrelay.relayapi.registration_rules import (
    API_SERVICE_NAME,
    api_service,
    local_endpoints,
    local_service,
    reachable_address,
    service_host,
)

CA = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"


def test_the_api_service_names_the_group_version_service_and_ca() -> None:
    registration = api_service("jobrelay-system", "jobrelay-api", 443, CA)
    assert API_SERVICE_NAME == "v1alpha1.api.jobrelay.dev"
    assert registration["metadata"]["name"] == API_SERVICE_NAME
    spec = registration["spec"]
    assert (spec["group"], spec["version"]) == ("api.jobrelay.dev", "v1alpha1")
    assert spec["service"] == {"namespace": "jobrelay-system", "name": "jobrelay-api",
                               "port": 443}  # fmt: skip
    assert base64.b64decode(spec["caBundle"]).decode() == CA
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (100, 100)
    assert "insecureSkipTLSVerify" not in spec
    assert service_host("jobrelay-system") == "jobrelay-api.jobrelay-system.svc"


def test_the_service_and_its_slice_send_the_aggregator_to_the_listener() -> None:
    service = local_service("jobrelay-system", 40123)
    assert "selector" not in service["spec"] and service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": 40123, "protocol": "TCP"}
    ]
    slice_ = local_endpoints("jobrelay-system", "127.0.0.1", 40123)
    labels = slice_["metadata"]["labels"]
    assert labels["kubernetes.io/service-name"] == "jobrelay-api"
    assert labels["endpointslice.kubernetes.io/managed-by"] == "jobrelay.dev"
    # Validation refuses loopback in IPv4 slices; an FQDN slice carries it.
    assert slice_["addressType"] == "FQDN"
    assert slice_["endpoints"] == [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]
    assert slice_["ports"] == [{"name": "https", "port": 40123, "protocol": "TCP"}]


@pytest.mark.parametrize(
    ("bound", "address"),
    [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"),
     ("::1", "127.0.0.1"), ("", "127.0.0.1"), ("192.0.2.7", "192.0.2.7")],
)  # fmt: skip
def test_the_address_the_aggregator_dials(bound: str, address: str) -> None:
    assert reachable_address(bound) == address


@pytest.mark.parametrize("bound", ["fd00::2", "example.com"])
def test_what_an_fqdn_slice_cannot_carry_is_refused(bound: str) -> None:
    with pytest.raises(ValueError, match="IPv4"):
        reachable_address(bound)
