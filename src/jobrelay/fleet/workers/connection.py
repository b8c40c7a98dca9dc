"""A worker's connection: its client built from the kubeconfig Secret, and rotation.

A rotated kubeconfig Secret reconnects its worker without a restart, and the
worker's mirror caches are never seen empty meanwhile: the new connection is
built beside the old one, which keeps serving the reconciler until the new
caches have listed (or the new credentials have failed), and only then takes
its place. The old client is closed only once any request a reconcile began on
it has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from jobrelay.fleet import workerclusters
from jobrelay.fleet.cluster_profiles import PROFILE_SPEC_KEY, ClusterProfileSource
from jobrelay.fleet.workers.record import Identity, Worker
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.resources import SECRETS
from jobrelay.kube.watching import Informer, InformerOptions
from jobrelay.vocabulary.meta import Meta

__all__ = ["ClientFactory", "Connector", "client_from_kubeconfig", "wait_listed"]

# How often a (re)connecting worker's caches are looked at until they have listed or failed.
_LISTED_POLL = 0.05

# Builds a worker's client from its kubeconfig: (kubeconfig, context, worker name, options).
ClientFactory = Callable[[Mapping[str, Any], str | None, str, ApiOptions], ApiClient]


def client_from_kubeconfig(
    kubeconfig: Mapping[str, Any], context: str | None, name: str, options: ApiOptions
) -> ApiClient:
    return ApiClient.from_kubeconfig_dict(kubeconfig, context, cluster=name, options=options)


class Connector:
    """Builds workers' clients from their kubeconfig Secrets (watched, so that a rotated
    credential reconnects its worker) and closes retired ones once they are idle."""

    def __init__(
        self,
        manager: ApiClient,
        *,
        namespace: str,
        api: ApiOptions,
        informer: InformerOptions,
        allow_exec_credentials: bool,
        client_factory: ClientFactory,
        stream_connections: int = 0,
        profiles: ClusterProfileSource | None = None,
    ) -> None:
        self._manager = manager
        # Workers from ClusterProfiles: their credentials come from the profile and the
        # access-provider file, not from a Secret.
        self._profiles = profiles
        self._namespace = namespace
        self._api = api
        # Users' streams (logs, their pod watches) go through a second client per worker,
        # bounded apart: the probe, the informers and the mirror writes never wait
        # behind them in one pool. 0: none (they share the first).
        self._stream_connections = stream_connections
        self._allow_exec = allow_exec_credentials
        self._client_factory = client_factory
        self.secrets = Informer(manager, SECRETS, namespace=namespace, options=informer)
        # Clients of workers that left the pool, closed once their last requests are over.
        self._retiring: set[asyncio.Task[None]] = set()

    def identity(self, spec: Mapping[str, Any]) -> Identity:
        """What a connection from ``spec`` is built from: a change reconnects."""
        profile = spec.get(PROFILE_SPEC_KEY)
        if profile is not None and self._profiles is not None:
            return self._profiles.identity(str(profile.get("name")))
        ref = spec.get("kubeconfigSecretRef") or {}
        secret = self.secrets.get(f"{self._namespace}/{ref.get('name')}")
        return (
            str(ref.get("name")),
            str(ref.get("key")),
            str(spec.get("context") or ""),
            str((Meta(secret).raw).get("resourceVersion", "")),
        )

    @staticmethod
    def using_secret(secret: str, registrations: Iterable[Mapping[str, Any]]) -> list[str]:
        """The workers whose kubeconfig is the Secret named ``secret``."""
        return [
            Meta(registration).name
            for registration in registrations
            if ((registration.get("spec") or {}).get("kubeconfigSecretRef") or {}).get("name")
            == secret
        ]

    async def client(
        self, name: str, spec: Mapping[str, Any]
    ) -> tuple[ApiClient, ApiClient | None]:
        """A client from the worker's kubeconfig Secret, and the client of users' streams
        (None when they share it); raises RegistryError or ValueError when it is unusable."""
        if spec.get(PROFILE_SPEC_KEY) is not None and self._profiles is not None:
            kubeconfig, context = self._profiles.kubeconfig(name), None
        else:
            kubeconfig = await workerclusters.read_kubeconfig(
                self._manager, {"spec": spec}, self._namespace, allow_exec=self._allow_exec
            )
            context = spec.get("context") or None
        client = self._client_factory(kubeconfig, context, name, self._api)
        if self._stream_connections <= 0:
            return client, None
        streams = self._client_factory(
            kubeconfig, context, name, replace(self._api, max_connections=self._stream_connections)
        )
        return client, streams

    async def retire(self, worker: Worker) -> None:
        """Stop a worker that left the pool; its client is closed only once any request
        a reconcile began on it has ended (each is bounded by the API timeouts), so that
        a mirror being created while its worker reconnects is not cut off half-way."""
        await worker.stop_watching()
        task = asyncio.get_running_loop().create_task(
            _close_after(worker, self._api.connect_timeout + self._api.request_timeout),
            name=f"retire-{worker.name}",
        )
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def stop(self) -> None:
        """Close every retired client now."""
        for task in list(self._retiring):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def wait_listed(worker: Worker, timeout: float) -> None:
    """Until each mirror cache has listed or failed (no rights, no such kind there),
    bounded by ``timeout``; not at all when the worker did not answer its first probe:
    its status must say why now."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while worker.probe_error is None and loop.time() < deadline:
        if worker.listed_or_failed():
            return
        await asyncio.sleep(_LISTED_POLL)  # an Informer signals no failure to await


async def _close_after(worker: Worker, seconds: float) -> None:
    try:
        await asyncio.sleep(seconds)
    finally:
        await worker.close_clients()
