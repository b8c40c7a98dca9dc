"""The executor's half of ``CopyDependencies``: copy a workload's ConfigMaps, Secrets and
ServiceAccount from the manager onto a worker.

Each is read whole from the manager (its informer keeps only a digest), its copy's
body built by dependencies/copy_rules.py, and the worker's object of that name read
fresh: absent, it is created; ours, it is replaced (resourceVersion precondition)
only when its content differs (never because one more mirror uses it: however many
workloads share a copy, it is written once per change of its source); someone
else's, it is never written: remembered as foreign on that worker (the relay's
memory), and the plan stops so that the workload is decided again, elsewhere.
Copies carry no owners: the copy janitor (controller/copy_sweep.py) deletes one
once no mirror there uses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.plan import CopyDependencies, Retry, Terminal
from jobrelay.controller.relay.refusal_wording import RefusalAnswer
from jobrelay.dependencies.copy_rules import (
    RESOURCES,
    Source,
    copy_body,
    is_our_copy,
    refusal,
    slim_source,
    source_of,
)
from jobrelay.dependencies.template_references import Dependency
from jobrelay.fleet import refusals
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import DIGEST_ANNOTATION

__all__ = ["DependencyCopier"]

_log = logging.getLogger(__name__)


@dataclass
class DependencyCopier:
    manager: ApiClient
    memory: RelayMemory
    controller_name: str
    origin: str
    # Told of each copy made ("created") or brought up to date ("updated"), for metrics.
    copied: Callable[[str, str], None] | None = None
    # When a worker's refusal of a copy is tried again (--rejected-retry).
    rejected_retry: float = 30.0

    async def copy(self, worker: ApiClient, action: CopyDependencies) -> Retry | Terminal | None:
        """Copy each of ``action``'s dependencies; the reason it stopped, or None."""
        for dependency in action.dependencies:
            stopped = await self._copy_one(worker, action, dependency)
            if stopped is not None:
                return stopped
        return None

    async def _copy_one(
        self, worker: ApiClient, action: CopyDependencies, dependency: Dependency
    ) -> Retry | Terminal | None:
        ref, namespace = RESOURCES[dependency.kind], action.namespace
        source = await _read(self.manager, dependency, namespace)
        if source is None:
            if dependency.optional:
                return None
            return Retry(f"{dependency} went from namespace {namespace} on the manager")
        if refusal(dependency, _as_source(dependency, source)) is not None:
            return Retry(f"{dependency} changed and may not be copied")  # decided again
        existing = await _read(worker, dependency, namespace)
        if existing is None:
            body = self._body(dependency, source)
            try:
                await worker.create(ref, body, namespace=namespace)
            except ApiError as error:
                if not error.is_already_exists:
                    return self._refused(action, dependency, error)
                existing = await _read(worker, dependency, namespace)
                if existing is None:
                    return Retry(f"{dependency} on {action.cluster} came and went")
            else:
                self._done(action, dependency, "created")
                return None
        if not is_our_copy(existing, self.controller_name, self.origin):
            self.memory.foreign_copy(action.cluster, namespace, str(dependency))
            message = (
                f"{dependency} in {namespace} on worker cluster {action.cluster} was not made "
                "by jobrelay: left alone"
            )
            _log.warning("%s", message, extra={"cluster": action.cluster})
            return Retry(message)
        body = self._body(dependency, source)
        current = Meta(existing).annotations.get(DIGEST_ANNOTATION)
        if current == body["metadata"]["annotations"][DIGEST_ANNOTATION]:
            return None  # its content is current: one more user costs no write
        body["metadata"]["resourceVersion"] = Meta(existing).resource_version
        try:
            await worker.replace(ref, body, namespace=namespace)
        except ApiError as error:
            if error.is_conflict or error.is_not_found:
                return Retry(f"{dependency} on {action.cluster} changed while it was copied")
            return self._refused(action, dependency, error)
        self._done(action, dependency, "updated")
        return None

    def _body(self, dependency: Dependency, source: JsonObj) -> JsonObj:
        return copy_body(
            dependency, source, controller_name=self.controller_name, origin=self.origin
        )

    def _done(self, action: CopyDependencies, dependency: Dependency, how: str) -> None:
        if self.copied is not None:
            self.copied(action.cluster, how)
        _log.info(
            "%s copy of %s in %s on %s",
            how,
            dependency,
            action.namespace,
            action.cluster,
            extra={"cluster": action.cluster},
        )

    def _refused(
        self, action: CopyDependencies, dependency: Dependency, error: ApiError
    ) -> Terminal:
        if error.is_unreachable:
            raise error
        facts = {
            "cluster": action.cluster,
            "namespace": action.namespace,
            "dependency": str(dependency),
            "refusal": refusals.refusal_for_tenants(error),
        }
        return action.if_refused.terminal(
            RefusalAnswer.REFUSED, facts, retry_after=self.rejected_retry, answered=error.message
        )


def _as_source(dependency: Dependency, obj: JsonObj) -> Source:
    source = source_of(slim_source(dependency.kind)(obj))
    assert source is not None
    return source


async def _read(client: ApiClient, dependency: Dependency, namespace: str) -> JsonObj | None:
    try:
        return await client.get(RESOURCES[dependency.kind], dependency.name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            return None
        raise
