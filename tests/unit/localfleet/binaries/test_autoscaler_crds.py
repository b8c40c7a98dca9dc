"""cluster-autoscaler's ProvisioningRequest CRD: where it comes from, the cache (an empty
one says to build), and the v1 it is served as."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.autoscaler_crds import (
    AUTOSCALER_CRD_SOURCES,
    autoscaler_crds,
    autoscaler_crds_path,
    load_provisioning_request_crd,
    served_as_v1,
)


def beta_crd() -> dict[str, Any]:
    """The shape of the CRD in the module zip: v1beta1 alone."""
    schema = {
        "properties": {
            "spec": {
                "properties": {
                    "podSets": {
                        "items": {"properties": {"podTemplateRef": {"type": "object"}}},
                        "type": "array",
                    }
                }
            }
        }
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "provisioningrequests.autoscaling.x-k8s.io", "annotations": {}},
        "spec": {
            "group": "autoscaling.x-k8s.io",
            "versions": [
                {"name": "v1beta1", "served": True, "storage": True,
                 "schema": {"openAPIV3Schema": schema}},
            ],
        },
    }  # fmt: skip


def test_the_crd_comes_from_the_apis_module_zip() -> None:
    assert AUTOSCALER_CRD_SOURCES == (
        (
            "k8s.io/autoscaler/cluster-autoscaler/apis",
            "v0.0.0-20240627115740-d52e4b9665d7",
            ("config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml",),
        ),
    )


def test_v1_is_the_storage_version_and_v1beta1_is_kept_deprecated_with_one_schema() -> None:
    original = beta_crd()
    crd = served_as_v1(original)
    current, beta = crd["spec"]["versions"]
    assert (current["name"], current["storage"], current["served"]) == ("v1", True, True)
    assert (beta["name"], beta["storage"], beta["deprecated"]) == ("v1beta1", False, True)
    ref = current["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["podSets"]
    assert ref["items"]["properties"]["podTemplateRef"]["required"] == ["name"]
    assert crd["metadata"] == {"name": "provisioningrequests.autoscaling.x-k8s.io"}
    # The original is left as it was, and a CRD serving v1 already is taken as it is.
    assert [v["name"] for v in original["spec"]["versions"]] == ["v1beta1"]
    assert served_as_v1(crd) is crd


def test_the_cache_is_used_and_an_empty_one_says_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path))
    with pytest.raises(BinaryError, match="run `jobrelay fleet build`"):
        autoscaler_crds(print, build=False)
    cached = autoscaler_crds_path()
    assert cached.parent == tmp_path / "crds"
    cached.parent.mkdir()
    cached.write_text(json.dumps([beta_crd()]))
    assert autoscaler_crds(print, build=False) == cached
    assert load_provisioning_request_crd(cached)["spec"]["versions"][0]["name"] == "v1"


@pytest.mark.parametrize("text", ["{", "{}", '[{"kind": "CustomResourceDefinition"}]'])
def test_a_file_without_the_crd_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "crds.json"
    path.write_text(text)
    with pytest.raises(BinaryError, match=r"crds\.json"):
        load_provisioning_request_crd(path)
