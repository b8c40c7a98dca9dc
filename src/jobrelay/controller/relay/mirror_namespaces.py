"""The worker namespaces the executor writes into, for a mirror, its copies or its
capacity claims: open to this manager only.

A namespace jobrelay makes there carries this manager's origin label, the Pod Security
labels of the manager's namespace of that name and that namespace's UID; one a worker's
admin or tenant made is theirs and is never used; one made for an earlier manager
namespace of that name (deleted and made again since) is not used either
(fleet/namespace_grants.py, ``stale_namespace``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from jobrelay.controller.relay.plan import Retry
from jobrelay.fleet.namespace_grants import MANAGER_NAMESPACE_UID, stale_namespace
from jobrelay.fleet.workers import Worker
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES
from jobrelay.placement.admission_probes import pod_security_labels
from jobrelay.placement.namespaces import opt_in_hint
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import ORIGIN_LABEL

__all__ = ["MirrorNamespaces"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MirrorNamespaces:
    manager: ApiClient
    # Whether jobrelay makes a missing namespace on a worker (--no-create-namespaces: no).
    create: bool
    # This manager's origin: the label that opens a worker namespace to it.
    origin: str
    # The UID of a manager namespace, as cached (None: not known).
    manager_namespace_uid: Callable[[str], str | None]

    def made_for_another(self, worker: Worker, cluster: str, namespace: str) -> Retry | None:
        """A Retry when the worker's namespace was made for an earlier manager namespace of
        that name (a re-created one inherits nothing of it)."""
        message = stale_namespace(
            namespace, cluster, worker.namespace_feed.made_for(namespace),
            self.manager_namespace_uid(namespace),
        )  # fmt: skip
        if message is None:
            return None
        _log.warning("%s", message, extra={"cluster": cluster})
        return Retry(message)

    async def open(self, client: ApiClient, cluster: str, namespace: str) -> Retry | None:
        """Make sure the workload's namespace on a worker is there and open to this manager:
        created with its origin label (when allowed), or found carrying it. One that a
        worker's admin or tenant made is theirs, with their ServiceAccounts and Secrets:
        unless it carries our label, no mirror goes there, and the workload is decided
        again (the namespace cache then shows why)."""
        if self.create and await self._create(client, namespace):
            return None
        try:
            existing = await client.get(NAMESPACES, namespace)
        except ApiError as error:
            if error.is_not_found and not self.create:
                return None  # the mirror's create says so (namespace creation is off)
            raise
        if Meta(existing).labels.get(ORIGIN_LABEL) == self.origin:
            recorded = Meta(existing).annotations.get(MANAGER_NAMESPACE_UID)
            stale = stale_namespace(
                namespace, cluster, recorded if isinstance(recorded, str) else None,
                self.manager_namespace_uid(namespace),
            )  # fmt: skip
            return None if stale is None else Retry(stale)
        message = (
            f"namespace {namespace} on worker cluster {cluster} exists there and is not "
            f"open to this manager ({opt_in_hint(self.origin)})"
        )
        _log.warning("%s: not creating the mirror there", message, extra={"cluster": cluster})
        return Retry(message)

    async def _create(self, client: ApiClient, namespace: str) -> bool:
        """Create the workload's namespace on a worker, with the Pod Security labels of
        the manager's namespace of that name: the worker then enforces the same level
        (its default, with no label, is privileged). One that exists is left as it is:
        it is the worker admin's. Labelled with this manager's origin: open to it alone.
        True when it was created here."""
        made_for = Meta(await self.manager.get(NAMESPACES, namespace))
        labels = pod_security_labels(made_for.labels)
        metadata: JsonObj = {"name": namespace, "labels": {**labels, ORIGIN_LABEL: self.origin}}
        if made_for.uid:
            metadata["annotations"] = {MANAGER_NAMESPACE_UID: made_for.uid}
        try:
            await client.create(
                NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
            )
        except ApiError as error:
            if not error.is_already_exists:
                raise
            return False
        _log.info(
            "created namespace %s on %s",
            namespace,
            client.cluster,
            extra={"cluster": client.cluster},
        )
        return True
