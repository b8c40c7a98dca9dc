"""What the relay does to a worker namespace before it copies into it or places there.

Two things, both about a worker namespace that carries this manager's origin:

* its grant: the least-privilege worker credential reads and writes ConfigMaps, Secrets
  and ServiceAccounts, and reads a pod and its log, only where a RoleBinding of its
  namespaced ClusterRole says so (charts/jobrelay-worker/files/worker-access.yaml,
  ``namespaceBinding``). Before the first copy into a namespace it created or found
  opened, and once the first mirror is created there (its pods' logs are read with that
  grant, even when nothing was copied), the relay makes that RoleBinding (the worker's admission policy lets it, there alone, for itself alone), once
  per connection and namespace. A credential that reads those kinds everywhere (a worker
  admin's) needs none, and a user that is not a ServiceAccount gets none.
* its incarnation: a namespace the relay creates records the UID of the manager namespace
  it was made for (:data:`MANAGER_NAMESPACE_UID`). A manager namespace deleted and made
  again (perhaps by another tenant) has a new UID, and must not inherit what the worker
  namespace kept of the old one: its PersistentVolumeClaims, its RoleBindings. Nothing is
  placed there until a worker admin deletes it (jobrelay then makes it anew);
  :func:`stale_namespace` says so. A namespace a worker admin opened (no record) is theirs
  to keep as it is.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from jobrelay.fleet.serviceaccount import ROLE_BINDINGS, SELF_SUBJECT_ACCESS_REVIEWS
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.manifests import worker_access
from jobrelay.vocabulary.names import FIELD_MANAGER

__all__ = [
    "MANAGER_NAMESPACE_UID",
    "NamespaceGrants",
    "service_account_of",
    "stale_namespace",
]

_log = logging.getLogger(__name__)

# On a worker namespace jobrelay created: the UID of the manager namespace it serves.
MANAGER_NAMESPACE_UID = "jobrelay.dev/manager-namespace-uid"
_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# How long a new RoleBinding may take to be in force on the worker before the copy goes on.
BINDING_WAIT = 5.0


def service_account_of(username: str | None) -> tuple[str, str] | None:
    """(namespace, name) of a ServiceAccount's username; None for any other user."""
    if not username or not username.startswith(_SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username[len(_SERVICE_ACCOUNT_PREFIX) :].partition(":")
    return (namespace, name) if sep and namespace and name and ":" not in name else None


def stale_namespace(
    namespace: str, cluster: str, recorded: str | None, current: str | None
) -> str | None:
    """Why nothing goes into worker namespace ``namespace`` (None: it may): it was made for
    a manager namespace of that name whose UID (``recorded``) is not today's (``current``)."""
    if not recorded or not current or recorded == current:
        return None
    return (
        f"namespace {namespace} on worker cluster {cluster} was made for an earlier namespace "
        f"{namespace} on the manager (UID {recorded}, deleted since): it may still hold that "
        "namespace's PersistentVolumeClaims and RoleBindings, so nothing of this one goes "
        f"there until a worker admin deletes it (`kubectl delete namespace {namespace}`); "
        "jobrelay then makes it anew"
    )


@dataclass
class NamespaceGrants:
    """The RoleBindings this process made (or found) on each worker connection."""

    origin: str
    # (id of the worker's client, namespace, account): bound. A new connection binds again.
    bound: set[tuple[int, str, tuple[str, str]]] = field(default_factory=set)
    # The refusals logged, once each.
    refused: set[tuple[str, str]] = field(default_factory=set)

    async def ensure(
        self, client: ApiClient, namespace: str, username: str | None, *, everywhere: bool | None
    ) -> None:
        """Bind the namespaced ClusterRole of ``username`` in ``namespace`` (one opened to
        this origin). Advisory: a refusal is logged once and the copy that follows says
        what the worker answered."""
        account = service_account_of(username)
        if account is None or everywhere:
            return
        key = (id(client), namespace, account)
        if key in self.bound:
            return
        account_namespace, name = account
        binding = worker_access.namespace_binding(name, account_namespace, self.origin, namespace)
        try:
            await client.create(ROLE_BINDINGS, binding, namespace=namespace,
                                field_manager=FIELD_MANAGER)  # fmt: skip
        except ApiError as error:
            if error.is_not_found and error.details.get("kind") == "namespaces":
                return  # the namespace went away: the mirror's create makes it, then binds
            if not error.is_already_exists:
                if (client.cluster, namespace) not in self.refused:
                    self.refused.add((client.cluster, namespace))
                    _log.warning(
                        "worker %s: cannot bind ClusterRole %s in namespace %s (%s): "
                        "jobrelay's copies there need it (docs/security.md)",
                        client.cluster, binding["roleRef"]["name"], namespace, error,
                        extra={"cluster": client.cluster},
                    )  # fmt: skip
                return
        else:
            _log.info("worker %s: bound ClusterRole %s in namespace %s", client.cluster,
                      binding["roleRef"]["name"], namespace, extra={"cluster": client.cluster})  # fmt: skip
            await _until_in_force(client, namespace)
        self.bound.add(key)


async def _until_in_force(client: ApiClient, namespace: str) -> None:
    """Until the worker's authorizer (which learns a new RoleBinding through an informer)
    lets the credential read Secrets in ``namespace``, for at most :data:`BINDING_WAIT`
    seconds: the copy that follows would otherwise meet a stale 403."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "secrets",
                                        "namespace": namespace}},
    }  # fmt: skip
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BINDING_WAIT
    while loop.time() < deadline:
        try:
            answer = await client.review(SELF_SUBJECT_ACCESS_REVIEWS, review)
        except ApiError:
            return  # the copy says what the worker answers
        if (answer.get("status") or {}).get("allowed"):
            return
        await asyncio.sleep(0.05)  # the authorizer's informer catching up
