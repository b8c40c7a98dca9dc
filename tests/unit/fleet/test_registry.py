"""Reading a worker's kubeconfig from its Secret: every way it can be unusable is named,
and no message quotes the Secret's content (a kubeconfig's lines hold credentials)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from tests.unit.fleet.fakekube import FakeKube, collection_path

from jobrelay.fleet import registry
from jobrelay.fleet.credentials import KubeconfigRefused
from jobrelay.kube.api import SECRETS, ApiClient

NAMESPACE = "jobrelay-system"
SECRETS_PATH = collection_path(SECRETS, NAMESPACE)
WORKER = {"metadata": {"name": "w"}, "spec": {"kubeconfigSecretRef": {"name": "s", "key": "k"}}}


@pytest.fixture
async def manager() -> AsyncIterator[tuple[FakeKube, ApiClient]]:
    fake = FakeKube("manager")
    fake.serve(SECRETS_PATH)
    async with fake.client() as client:
        yield fake, client


def store(fake: FakeKube, data: dict[str, str]) -> None:
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    fake.put(SECRETS_PATH, {"metadata": {"name": "s", "namespace": NAMESPACE}, "data": encoded})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, "Secret jobrelay-system/s is missing"),
        ({"other": "x"}, "Secret jobrelay-system/s has no key 'k'"),
        ({"k": "- just\n- a list\n"}, "key 'k': is not a kubeconfig"),
        ({"k": "users:\n- user: {token: s3cret-token: x}\n"},
         "is not a kubeconfig: invalid YAML at line 2, column 29: while parsing a flow mapping"),
        ({"k": "users:\n- user:\n    token: *s3cret-token\n"},
         "invalid YAML at line 3, column 12: found undefined alias '...'"),
        ({"k": "token: !!s3cret-token x\n"}, "for the tag '...'"),
    ],
)  # fmt: skip
async def test_an_unusable_secret_is_named_without_its_content(
    manager: tuple[FakeKube, ApiClient], data: dict[str, str] | None, expected: str
) -> None:
    fake, client = manager
    if data is not None:
        store(fake, data)
    with pytest.raises((registry.RegistryError, KubeconfigRefused)) as error:
        await registry.read_kubeconfig(client, WORKER, NAMESPACE)
    assert expected in str(error.value)
    assert "s3cret" not in str(error.value)


async def test_a_readable_secret_gives_its_kubeconfig(manager: tuple[FakeKube, ApiClient]) -> None:
    fake, client = manager
    text = (
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://w:6443'}}]\n"
        "contexts: [{name: x, context: {cluster: c}}]\n"
    )
    store(fake, {"k": text})
    assert (await registry.read_kubeconfig(client, WORKER, NAMESPACE))["current-context"] == "x"
