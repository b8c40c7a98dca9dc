"""Serving the logs API and publishing where it is.

The server's certificate (given, or self-signed for every name the controller may
be reached by), the manager's client CA that callers' certificates are checked
against, the URL clients use, and the ConfigMap ``<--namespace>/jobrelay-api``
(keys ``address`` and ``ca.crt``) that says so, readable by every authenticated
user (the chart's api-reader Role); only the leader writes it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.httpserver import ApiServer
from jobrelay.relayapi.rules import API_CONFIGMAP, published_configmap
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.vocabulary.names import FIELD_MANAGER
from jobrelay.web.tls import self_signed, server_context

__all__ = ["client_ca", "publish", "start_api"]

_log = logging.getLogger(__name__)

_AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


async def client_ca(manager: ApiClient) -> str | None:
    """The manager's client CA (``client-ca-file`` of extension-apiserver-authentication),
    against which callers' client certificates are verified; None when it cannot be read."""
    namespace, name = _AUTH_CONFIGMAP
    try:
        configmap = await manager.get(CONFIGMAPS, name, namespace=namespace)
    except ApiError as error:
        _log.warning(
            "cannot read %s/%s (%s): the API accepts bearer tokens only",
            namespace, name, error.reason,
        )  # fmt: skip
        return None
    ca = (configmap.get("data") or {}).get("client-ca-file")
    return str(ca) if ca else None


def _url_for(bound: Sequence[tuple[str, int]], settings: ApiSettings) -> str:
    if settings.url:
        return settings.url.rstrip("/")
    host, port = bound[0][0], bound[0][1]
    if host in ("0.0.0.0", "::"):
        host = _own_address()
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def _own_address() -> str:
    """This host's address as others reach it (a pod's IP), else its name."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return socket.gethostname()


def _hosts(settings: ApiSettings) -> list[str]:
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname(), _own_address()]
    if settings.url and (host := urlsplit(settings.url).hostname):
        hosts.append(host)
    bound_host = settings.address.rpartition(":")[0].strip("[]")
    if bound_host and bound_host not in ("0.0.0.0", "::"):
        hosts.append(bound_host)
    return hosts


async def start_api(
    manager: ApiClient, handler: RelayApi, settings: ApiSettings
) -> tuple[ApiServer, str, str]:
    """Serve the API: the server, its published URL and the CA (PEM) clients trust."""
    if settings.cert_file or settings.key_file:
        if not (settings.cert_file and settings.key_file):
            raise ValueError("--api-cert-file and --api-key-file go together")
        cert_pem = await asyncio.to_thread(Path(settings.cert_file).read_bytes)
        key_pem = await asyncio.to_thread(Path(settings.key_file).read_bytes)
    else:
        cert_pem, key_pem = self_signed(_hosts(settings))
    if settings.ca_file and not settings.cert_file:
        raise ValueError("--api-ca-file is the CA of --api-cert-file: give both")
    # Every replica serves one certificate of one CA: clients trust the CA, whichever answers.
    ca_pem = (
        await asyncio.to_thread(Path(settings.ca_file).read_bytes) if settings.ca_file else cert_pem
    )
    _check_signed_by(cert_pem, ca_pem)
    tls = server_context(cert_pem, key_pem, await client_ca(manager))
    server = ApiServer(settings.address, tls, handler.handle, write_timeout=settings.write_timeout)
    bound = await server.start()
    return server, _url_for(bound, settings), ca_pem.decode()


def _check_signed_by(cert_pem: bytes, ca_pem: bytes) -> None:
    """ValueError unless the serving certificate verifies against the CA (a mismatched
    Secret would make every client refuse the API; say so at start instead)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cas = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as error:
        raise ValueError(f"the API certificate or its CA is not PEM: {error}") from None
    for ca in cas:
        if ca.subject != cert.issuer:
            continue
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return
    raise ValueError("the API certificate is not signed by --api-ca-file's CA")


async def publish(manager: ApiClient, namespace: str, url: str, ca_pem: str) -> None:
    """Write the ConfigMap (the leader's job), retrying until it is written or cancelled."""
    delay = 1.0
    while True:
        try:
            await manager.patch(
                CONFIGMAPS, API_CONFIGMAP, published_configmap(namespace, url, ca_pem),
                namespace=namespace, patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER,
                force=True,
            )  # fmt: skip
        except ApiError as error:
            _log.warning("cannot publish %s/%s: %s %s; retrying", namespace, API_CONFIGMAP,
                         error.reason, error.message)  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        _log.info(
            "published the API's address %s in ConfigMap %s/%s", url, namespace, API_CONFIGMAP,
            extra={"event": "api-published", "url": url},
        )  # fmt: skip
        return
