"""From a kubeconfig to a client: the context names it, and a bad kubeconfig is a KubeconfigError."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, KubeconfigError
from jobrelay.kube.resources import NODES

KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "worker-a",
    "clusters": [{"name": "a", "cluster": {"server": "http://127.0.0.1:1"}}],
    "users": [{"name": "a", "user": {"token": "secret-token"}}],
    "contexts": [
        {"name": "worker-a", "context": {"cluster": "a", "user": "a"}},
        {"name": "other", "context": {"cluster": "a", "user": "a"}},
    ],
}


async def test_from_kubeconfig_dict_names_the_client_after_the_context() -> None:
    async with ApiClient.from_kubeconfig_dict(KUBECONFIG) as client:
        assert client.cluster == "worker-a"
    async with ApiClient.from_kubeconfig_dict(KUBECONFIG, "other", cluster="b") as client:
        assert client.cluster == "b"
        # Nothing listens on port 1: the failure is an ApiError, not an httpx one.
        with pytest.raises(ApiError) as caught:
            await client.get(NODES, "n")
        assert caught.value.is_unreachable


async def test_from_kubeconfig_reads_a_file(tmp_path: Any) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    async with ApiClient.from_kubeconfig(path) as client:
        assert client.cluster == "worker-a"


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {**KUBECONFIG, "current-context": "missing"},
        {**KUBECONFIG, "clusters": [{"name": "a"}]},
    ],
)
def test_bad_kubeconfigs_raise_kubeconfig_error(broken: dict[str, Any]) -> None:
    with pytest.raises(KubeconfigError):
        ApiClient.from_kubeconfig_dict(broken)


def test_a_missing_kubeconfig_file_raises_kubeconfig_error(tmp_path: Any) -> None:
    with pytest.raises(KubeconfigError):
        ApiClient.from_kubeconfig(tmp_path / "nope")
