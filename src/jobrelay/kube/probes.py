"""Health probes of control-plane endpoints (/readyz, /healthz, etcd's /health)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx2


def _tls_context(ca: Path | None) -> ssl.SSLContext:
    if ca is None:
        # Component endpoints (controller-manager, scheduler) serve self-signed
        # certificates; a health probe learns nothing secret from them.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=str(ca))


async def probe(url: str, *, ca: Path | None = None, timeout: float = 2.0) -> tuple[bool, str]:
    """GET ``url``; healthy means HTTP 200. Returns (healthy, short detail)."""
    verify: ssl.SSLContext | bool = False
    if url.startswith("https://"):
        # The apiserver's certificate is signed by the fleet CA; components self-sign.
        verify = _tls_context(ca if "/readyz" in url else None)
    try:
        async with httpx2.AsyncClient(verify=verify, timeout=timeout) as client:
            response = await client.get(url)
    except httpx2.HTTPError as error:
        return False, f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if response.status_code == 200:
        return True, "healthy"
    return False, f"HTTP {response.status_code}: {response.text[:200].strip()}"
