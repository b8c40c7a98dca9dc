"""Reading a worker's kubeconfig from its Secret: every way it can be unusable is named,
and no message quotes the Secret's content (a kubeconfig's lines hold credentials)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.unit.fleet.fakekube import FakeKube, collection_path

from jobrelay.fleet import workerclusters
from jobrelay.fleet.credentials import KubeconfigRefused
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import SECRETS

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
        ({"k": "- just\n- a list\n"}, "key 'k' is not a kubeconfig: not a mapping"),
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
    with pytest.raises((workerclusters.RegistryError, KubeconfigRefused)) as error:
        await workerclusters.read_kubeconfig(client, WORKER, NAMESPACE)
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
    assert (await workerclusters.read_kubeconfig(client, WORKER, NAMESPACE))[
        "current-context"
    ] == "x"


# -- `jobrelay clusters add`: the admin's kubeconfig, files inlined ------------------

SECRET = "s3cr3t-VALUE-91aa0c"


def admin_kubeconfig(tmp_path: Path, user: dict[str, Any], **cluster: Any) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "w", "user": "admin"}}],
        "current-context": "ctx",
    }
    path = tmp_path / "admin.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_certificate_key_and_ca_files_are_inlined(tmp_path: Path) -> None:
    for name in ("ca.crt", "admin.crt", "admin.key"):
        (tmp_path / name).write_text(f"{name} {SECRET}")
    path = admin_kubeconfig(
        tmp_path, {"client-certificate": "admin.crt", "client-key": str(tmp_path / "admin.key")},
        **{"certificate-authority": "ca.crt"},
    )  # fmt: skip
    inlined = workerclusters.inline_kubeconfig(path)
    user = inlined["users"][0]["user"]
    cluster = inlined["clusters"][0]["cluster"]
    assert base64.b64decode(user["client-key-data"]).decode() == f"admin.key {SECRET}"
    assert base64.b64decode(user["client-certificate-data"]).decode() == f"admin.crt {SECRET}"
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == f"ca.crt {SECRET}"
    assert {"client-key", "client-certificate"}.isdisjoint(user)
    assert "certificate-authority" not in cluster


@pytest.mark.parametrize(
    ("user", "cluster", "expected"),
    [
        ({"tokenFile": "token"}, {}, 'users[0] "admin": tokenFile is refused'),
        ({"tokenFile": "token"}, {}, "--create-service-account"),
        ({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": SECRET}}, {},
         'users[0] "admin": exec credential plugins are refused '
         "(jobrelay clusters add --allow-exec-credentials allows them)"),
        ({"auth-provider": {"name": "oidc", "config": {"id-token": SECRET}}}, {},
         'users[0] "admin": auth-provider is refused'),
        ({"token": SECRET}, {"insecure-skip-tls-verify": True},
         'clusters[0] "w": insecure-skip-tls-verify: true is refused'),
    ],
)  # fmt: skip
def test_clusters_add_refuses_what_the_controller_would(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], expected: str
) -> None:
    (tmp_path / "token").write_text(SECRET)
    with pytest.raises(KubeconfigRefused) as raised:
        workerclusters.inline_kubeconfig(admin_kubeconfig(tmp_path, user, **cluster))
    assert expected in str(raised.value) and SECRET not in str(raised.value)


def test_clusters_add_takes_an_exec_plugin_when_allowed(tmp_path: Path) -> None:
    plugin = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws"}
    inlined = workerclusters.inline_kubeconfig(
        admin_kubeconfig(tmp_path, {"exec": plugin}), allow_exec=True
    )
    assert inlined["users"][0]["user"] == {"exec": plugin}


def test_a_missing_certificate_file_is_named(tmp_path: Path) -> None:
    path = admin_kubeconfig(tmp_path, {"client-certificate": "gone.crt", "client-key-data": "a2V5"})
    with pytest.raises(
        workerclusters.RegistryError, match=r"cannot inline client-certificate .*gone\.crt"
    ):
        workerclusters.inline_kubeconfig(path)


def test_an_unparsable_kubeconfig_file_is_named_without_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "broken"
    path.write_text(f"users:\n- user: {{token: {SECRET}: x}}\n")
    with pytest.raises(workerclusters.RegistryError) as raised:
        workerclusters.inline_kubeconfig(path)
    assert "invalid YAML at line 2" in str(raised.value) and SECRET not in str(raised.value)


async def test_a_refused_secret_names_the_secret_and_the_field(
    manager: tuple[FakeKube, ApiClient],
) -> None:
    fake, client = manager
    text = yaml.safe_dump(
        {
            "clusters": [{"name": "c", "cluster": {"server": "https://w"}}],
            "users": [{"name": "u", "user": {"tokenFile": f"/{SECRET}"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )
    store(fake, {"k": text})
    with pytest.raises(KubeconfigRefused) as raised:
        await workerclusters.read_kubeconfig(client, WORKER, NAMESPACE, allow_exec=True)
    message = str(raised.value)
    assert message.startswith(
        "Secret jobrelay-system/s key 'k': users[0] \"u\": tokenFile is refused"
    )
    assert SECRET not in message
