"""The controller's HTTP listeners as runnables of its start-up (controller/runnables.py):
the probes and /metrics (web/probe_server.py), and the aggregated API
(relayapi/serving.py). Both serve leader and standby alike, from before the caches
start until after they stop."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from jobrelay.controller.kind_resolution import ConfigurationError
from jobrelay.kube.client import ApiClient
from jobrelay.relayapi import serving as relayapi
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.self_certificate import api_service_availability
from jobrelay.relayapi.self_certificate_rules import not_after
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.relayapi.trust import FrontProxyTrust
from jobrelay.web.probe_server import Health, HealthServer, MetricsPage, parse_address

__all__ = ["ApiListener", "Listener", "ProbeListeners", "listeners"]

_log = logging.getLogger(__name__)

# What one HTTP server serves: its flag, address, whether /metrics, the events it logs.
Listener = tuple[str, str, bool, tuple[str, ...]]


def listeners(metrics_address: str, health_address: str) -> list[Listener]:
    """The servers to start: probes and /metrics on the metrics address, probes on the
    health address; one address twice is one server, port 0 twice is two free ports."""
    shared = (
        bool(metrics_address)
        and health_address == metrics_address
        and parse_address(metrics_address)[1] != 0
    )
    wanted: list[Listener] = []
    if metrics_address:
        also = ("health-listening",) if shared else ()
        wanted.append(("--metrics-address", metrics_address, True, ("metrics-listening", *also)))
    if health_address and not shared:
        wanted.append(("--health-address", health_address, False, ("health-listening",)))
    return wanted


@dataclass
class ProbeListeners:
    """Probes and /metrics on --metrics-address, the probes on --health-address (one
    server when both name the same port); each logs where it listens."""

    metrics_address: str
    health_address: str
    health: Callable[[], Health]
    metrics: MetricsPage
    name: str = "probe and metrics servers"
    servers: list[HealthServer] = field(default_factory=list)

    async def start(self) -> None:
        for flag, address, with_metrics, events in listeners(
            self.metrics_address, self.health_address
        ):
            page = self.metrics if with_metrics else None
            server = HealthServer(address, self.health, page)
            try:
                bound = await server.start()
            except OSError as error:
                raise ConfigurationError(f"{flag} {address}: cannot listen: {error}") from error
            self.servers.append(server)
            routes = "/healthz, /readyz and /metrics" if page else "/healthz and /readyz"
            for event in events:
                _log.info("serving %s on %s", routes, ", ".join(bound),
                          extra={"event": event, "addresses": bound})  # fmt: skip

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    async def stop(self, *, graceful: bool) -> None:
        servers, self.servers = self.servers, []
        for server in servers:
            await server.close()


@dataclass
class ApiListener:
    """The aggregated API (--api-address) with the handler ``handler_for`` makes."""

    manager: ApiClient
    settings: ApiSettings
    handler_for: Callable[[FrontProxyTrust], RelayApi]
    namespace: str
    name: str = "aggregated API"
    running: relayapi.RunningApi | None = None
    # The APIService's Available condition as this replica last read it leading.
    api_service_available: bool | None = None
    _expiry: tuple[bytes, float | None] | None = None

    async def start(self) -> None:
        try:
            self.running = await relayapi.start_api(
                self.manager, self.settings, self.handler_for, namespace=self.namespace
            )
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"--api-address {self.settings.address}: {error}") from error
        host, port = self.running.bound
        url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        _log.info("serving the aggregated API on %s", url,
                  extra={"event": "api-listening", "url": url})  # fmt: skip

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    def certificate_expiry(self) -> float | None:
        """When the certificate new connections get expires (unix seconds; a gauge)."""
        running = self.running
        if running is None:
            return None
        served = running.trust.serving
        if self._expiry is None or self._expiry[0] is not served:  # parsed once per renewal
            self._expiry = (served, not_after(served))
        return self._expiry[1]

    async def watch_over(self) -> None:
        """The leader's care of the API while it serves, every --api-cert-reload-interval:
        --api-cert-secret renewed and its CA injected, and the chart's APIService's
        Available condition read (a gauge; with --api-register alone the leader writes
        its own and reads nothing)."""
        running = self.running
        keeper = running.self_certificate if running is not None else None
        if running is None or (keeper is None and self.settings.register):
            return
        try:
            while True:
                if keeper is not None:
                    await keeper.check(datetime.datetime.now(datetime.UTC))
                    self.api_service_available = keeper.api_service_available
                else:
                    self.api_service_available = await api_service_availability(self.manager)
                await asyncio.sleep(self.settings.cert_reload_interval)
        finally:
            self.api_service_available = None  # leading no more: not known any more

    async def stop(self, *, graceful: bool) -> None:
        running, self.running = self.running, None
        if running is not None:
            await running.close()
