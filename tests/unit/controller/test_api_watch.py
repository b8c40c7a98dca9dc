"""The aggregated API's listener, as the gauges read it: the expiry of the certificate new
connections get, and the APIService's Available condition as the leader last read it."""

from __future__ import annotations

import asyncio
import datetime
from types import SimpleNamespace
from typing import Any

from cryptography import x509
from tests.kubetools import eventually

from jobrelay.controller.http_serving import ApiListener
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.web.tls import self_signed


class _Manager:
    """Answers every GET with the APIService ``condition`` names."""

    def __init__(self) -> None:
        self.status = "False"
        self.reads = 0

    async def get(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        self.reads += 1
        return {"status": {"conditions": [{"type": "Available", "status": self.status}]}}


def _listener(manager: Any, cert_pem: bytes, *, register: bool = False) -> ApiListener:
    running = SimpleNamespace(trust=SimpleNamespace(serving=cert_pem), self_certificate=None)
    settings = ApiSettings(register=register, cert_reload_interval=0.01)
    return ApiListener(manager, settings, lambda _t: None, "ops", running=running)  # type: ignore[arg-type]


def _expiry(cert_pem: bytes) -> float:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()


async def test_the_expiry_follows_the_certificate_served() -> None:
    first, _ = self_signed(["localhost"])
    listener = _listener(_Manager(), first)
    assert listener.certificate_expiry() == _expiry(first)
    renewed, _ = self_signed(["localhost"])
    listener.running.trust.serving = renewed  # type: ignore[union-attr]
    assert listener.certificate_expiry() == _expiry(renewed)
    assert listener.certificate_expiry() > datetime.datetime.now(datetime.UTC).timestamp()


async def test_the_leader_reads_the_api_services_condition_until_it_stops_leading() -> None:
    manager = _Manager()
    listener = _listener(manager, self_signed(["localhost"])[0])
    leading = asyncio.create_task(listener.watch_over())
    try:
        await eventually(lambda: _is(listener.api_service_available, False), timeout=5)
        manager.status = "True"
        await eventually(lambda: _is(listener.api_service_available, True), timeout=5)
    finally:
        leading.cancel()
        await asyncio.gather(leading, return_exceptions=True)
    assert listener.api_service_available is None  # a standby knows nothing


async def test_with_api_register_alone_nothing_is_read() -> None:
    manager = _Manager()
    listener = _listener(manager, self_signed(["localhost"])[0], register=True)
    await listener.watch_over()  # returns at once
    assert manager.reads == 0 and listener.api_service_available is None


async def _is(value: bool | None, wanted: bool) -> bool:
    return value is wanted
