"""What the relay does to an opened worker namespace (fleet/namespace_grants.py): it binds
the worker credential's namespaced ClusterRole there once per connection, and a namespace
made for an earlier manager namespace of that name is not used."""

from __future__ import annotations

import json

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.fleet.namespace_grants import NamespaceGrants, service_account_of, stale_namespace
from jobrelay.kube.client import ApiClient


@pytest.mark.parametrize(
    ("username", "account"),
    [
        ("system:serviceaccount:ops:jobrelay-worker-m", ("ops", "jobrelay-worker-m")),
        ("system:serviceaccount:ops:", None),
        ("system:serviceaccount::name", None),
        ("kubernetes-admin", None),
        ("system:serviceaccount:a:b:c", None),
        (None, None),
    ],
)
def test_service_account_of(username: str | None, account: tuple[str, str] | None) -> None:
    assert service_account_of(username) == account


@pytest.mark.parametrize(
    ("recorded", "current", "stale"),
    [
        (None, "u2", False),  # opened by a worker admin (or by an older jobrelay): theirs
        ("u1", None, False),  # the manager namespace is not known (yet): the create decides
        ("u1", "u1", False),  # made for this very namespace
        ("u1", "u2", True),  # made for an earlier namespace of that name
    ],
)
def test_a_namespace_made_for_an_earlier_manager_namespace_is_not_used(
    recorded: str | None, current: str | None, stale: bool
) -> None:
    message = stale_namespace("team-a", "w1", recorded, current)
    assert (message is not None) is stale
    if message is not None:
        assert "PersistentVolumeClaims and RoleBindings" in message
        assert "kubectl delete namespace team-a" in message and "u1" in message


@given(st.text(max_size=20), st.text(max_size=20))
def test_only_a_different_recorded_uid_is_stale(recorded: str, current: str) -> None:
    stale = stale_namespace("n", "w", recorded or None, current or None) is not None
    assert stale == (bool(recorded) and bool(current) and recorded != current)


NO_RBAC_API = -404


def _client(answers: list[int], sent: list[dict[str, object]]) -> ApiClient:
    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append({"path": request.url.path, "body": json.loads(request.content)})
        if request.url.path.endswith("/selfsubjectaccessreviews"):  # in force at once
            return httpx2.Response(201, json={"status": {"allowed": True}})
        code = answers.pop(0)
        if code == 201:
            return httpx2.Response(201, json=json.loads(request.content))
        if code == NO_RBAC_API:  # a path the worker does not serve: no details
            return httpx2.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})
        reason = {409: "AlreadyExists", 403: "Forbidden", 404: "NotFound"}[code]
        status = {"kind": "Status", "code": code, "reason": reason}
        if code == 404:  # as the apiserver's namespace lifecycle answers
            status["details"] = {"name": request.url.path.split("/")[-2], "kind": "namespaces"}
        return httpx2.Response(code, json=status)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer), base_url="https://w1")
    return ApiClient(http, cluster="w1")


async def test_the_namespaced_role_is_bound_once_per_connection_and_namespace() -> None:
    sent: list[dict[str, object]] = []
    client = _client([201, 409], sent)
    grants = NamespaceGrants("m")
    user = "system:serviceaccount:ops:jobrelay-worker-m"
    for _ in range(3):
        await grants.ensure(client, "team-a", user, everywhere=False)
    await grants.ensure(client, "team-b", user, everywhere=False)  # there already: fine
    assert [s["path"] for s in sent] == [
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings",
        # Made: until the worker's authorizer has it in force.
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings",
    ]
    body = sent[0]["body"]
    assert isinstance(body, dict)
    assert body["roleRef"]["name"] == "jobrelay-worker-m-namespaced"
    assert body["subjects"] == [
        {"kind": "ServiceAccount", "name": "jobrelay-worker-m", "namespace": "ops"}
    ]
    await client.aclose()


async def test_no_binding_for_an_admin_a_credential_that_reads_everywhere_or_a_refusal() -> None:
    sent: list[dict[str, object]] = []
    client = _client([403, 403], sent)
    grants = NamespaceGrants("m")
    await grants.ensure(client, "team-a", "kubernetes-admin", everywhere=None)
    await grants.ensure(client, "team-a", "system:serviceaccount:o:a", everywhere=True)
    assert sent == []
    # Refused (no bind right): logged once, asked again later (a worker admin may grant it).
    await grants.ensure(client, "team-a", "system:serviceaccount:o:a", everywhere=False)
    await grants.ensure(client, "team-a", "system:serviceaccount:o:a", everywhere=False)
    assert len(sent) == 2 and grants.bound == set()
    await client.aclose()


async def test_a_namespace_gone_before_its_binding_is_neither_a_refusal_nor_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bound before the mirror's create, the namespace may have gone meanwhile: nothing
    logged (the create makes it again, then binds), and bound on the next try."""
    sent: list[dict[str, object]] = []
    client = _client([404, 201], sent)
    grants = NamespaceGrants("m")
    user = "system:serviceaccount:ops:jobrelay-worker-m"
    await grants.ensure(client, "team-a", user, everywhere=False)
    assert grants.bound == set() and grants.refused == set()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    await grants.ensure(client, "team-a", user, everywhere=False)
    assert len(grants.bound) == 1
    await client.aclose()


async def test_a_not_found_that_names_no_namespace_is_a_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker that does not serve the RoleBinding API answers 404 too, naming no
    namespace: said once, as any refusal, not taken for a namespace gone."""
    sent: list[dict[str, object]] = []
    client = _client([NO_RBAC_API, NO_RBAC_API], sent)
    grants = NamespaceGrants("m")
    user = "system:serviceaccount:ops:jobrelay-worker-m"
    await grants.ensure(client, "team-a", user, everywhere=False)
    await grants.ensure(client, "team-a", user, everywhere=False)
    assert grants.bound == set() and grants.refused == {("w1", "team-a")}
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
    await client.aclose()
