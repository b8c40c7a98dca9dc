"""The chart's `clusterProfiles` values: the three `jobrelay run` flags, the access-provider
file mounted from a ConfigMap or a Secret, a Role reading the profiles' namespace, and
nothing of it by default (helm 3 and 4, no fleet)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.chart_render import CHART, KUBE_VERSION, by_kind_and_name, chart_tools, render

pytestmark = pytest.mark.integration

PROFILES = {"namespace": "fleet-system", "selector": "env in (prod),!gpu"}


def _controller(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = by_kind_and_name(rendered)[("Deployment", "jobrelay")]
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


@pytest.mark.parametrize(
    ("source", "volume"),
    [
        ({"configMap": "providers"}, {"configMap": {"name": "providers"}}),
        ({"secret": "providers", "key": "p.yaml"}, {"secret": {"secretName": "providers", "defaultMode": 0o440}}),
    ],
)  # fmt: skip
def test_the_values_become_the_flags_the_mount_and_a_role(
    source: dict[str, str], volume: dict[str, Any]
) -> None:
    tools = chart_tools()
    for helm in (tools.helm, tools.helm4):
        rendered = render(helm, {"clusterProfiles": {**PROFILES, "accessProviders": source}})
        pod = _controller(rendered)
        args = pod["containers"][0]["args"]
        key = source.get("key", "config.json")
        assert "--cluster-profiles=fleet-system" in args
        assert "--cluster-profile-selector=env in (prod),!gpu" in args
        assert f"--cluster-profile-access-providers=/etc/jobrelay/access-providers/{key}" in args
        mount = {"name": "access-providers", "mountPath": "/etc/jobrelay/access-providers",
                 "readOnly": True}  # fmt: skip
        assert mount in pod["containers"][0]["volumeMounts"]
        assert {"name": "access-providers", **volume} in pod["volumes"]
        role = by_kind_and_name(rendered)[("Role", "jobrelay-cluster-profiles")]
        assert role["metadata"]["namespace"] == "fleet-system"
        assert role["rules"] == [{"apiGroups": ["multicluster.x-k8s.io"],
                                  "resources": ["clusterprofiles"],
                                  "verbs": ["get", "list", "watch"]}]  # fmt: skip
        binding = by_kind_and_name(rendered)[("RoleBinding", "jobrelay-cluster-profiles")]
        assert binding["subjects"][0]["namespace"] == "jobrelay-system"


def test_nothing_of_it_by_default_and_a_namespace_needs_the_file() -> None:
    tools = chart_tools()
    for helm in (tools.helm, tools.helm4):
        rendered = render(helm, {})
        assert not any(
            "cluster-profile" in arg for arg in _controller(rendered)["containers"][0]["args"]
        )
        assert ("Role", "jobrelay-cluster-profiles") not in by_kind_and_name(rendered)
        result = subprocess.run(
            [str(helm), "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
             "--values", "-"],
            input=json.dumps({"clusterProfiles": {"namespace": "fleet-system"}}),
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert result.returncode != 0 and "accessProviders" in result.stderr, result.stderr
