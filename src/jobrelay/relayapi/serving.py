"""Serving the aggregated API: its certificate, the front proxy it trusts, its registration.

The server's certificate is given (files: a mounted Secret, re-read when it
changes: ``certificate_files.py``), made and kept in a Secret by the controller
itself (``--api-cert-secret``: ``self_certificate.py``), or self-signed at start
for every name the controller may be reached by (the Service name the
aggregator verifies among them). Callers are trusted as the front proxy that
``trust.py`` keeps current. With ``--api-register`` the leader registers the
APIService and a Service reaching this replica (``registration_rules.py``), and
the managedBy defaulting webhook at this replica's own address
(``managedby_webhook_rules.py``): for a controller run outside the manager; the
chart registers its own. A clean stop removes the APIService but leaves the
webhook: with failurePolicy Fail, what it would default is refused while no
controller answers, never run on the manager.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import (
    API_SERVICES,
    ENDPOINT_SLICES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SERVICES,
)
from jobrelay.relayapi.certificate_files import CertificateFiles, ServedFiles
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.httpserver import ApiServer
from jobrelay.relayapi.managedby_webhook_rules import (
    FAIL,
    WEBHOOK_CONFIGURATION,
    ManagedByDefault,
    url_client_config,
    webhook_configuration,
)
from jobrelay.relayapi.registration_rules import (
    API_SERVICE_NAME,
    LOCAL_SERVICE,
    SERVICE_PORT,
    api_service,
    local_endpoints,
    local_service,
    reachable_address,
    service_host,
)
from jobrelay.relayapi.self_certificate import CertificateLifetimes, SelfCertificate
from jobrelay.relayapi.self_certificate_rules import ServingMaterial, serving_hosts
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.relayapi.trust import FrontProxyTrust
from jobrelay.vocabulary.names import FIELD_MANAGER
from jobrelay.web.tls import self_signed

__all__ = ["RunningApi", "deregister", "register", "start_api"]

_log = logging.getLogger(__name__)


@dataclass
class RunningApi:
    """The API as it runs: its server, the front proxy it trusts, where it listens and the
    CA (PEM) that signs its certificate (an APIService's caBundle)."""

    server: ApiServer
    trust: FrontProxyTrust
    bound: tuple[str, int]
    ca_pem: str
    # The Secret it serves from, kept by the leader (--api-cert-secret); else None.
    self_certificate: SelfCertificate | None = None
    # The files it serves, re-read as they change (--api-cert-file); else None.
    certificate_files: CertificateFiles | None = None

    async def close(self) -> None:
        await self.server.close()
        await self.trust.stop()
        if self.self_certificate is not None:
            await self.self_certificate.stop()
        if self.certificate_files is not None:
            await self.certificate_files.stop()


def _own_address() -> str:
    """This host's address as others reach it (a pod's IP), else its name."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return socket.gethostname()


def _hosts(settings: ApiSettings, namespace: str) -> list[str]:
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname(), _own_address()]
    hosts.append(service_host(namespace))
    if settings.url and (host := urlsplit(settings.url).hostname):
        hosts.append(host)
    bound_host = settings.address.rpartition(":")[0].strip("[]")
    if bound_host and bound_host not in ("0.0.0.0", "::"):
        hosts.append(bound_host)
    return hosts


async def _certificate(
    manager: ApiClient, settings: ApiSettings, namespace: str
) -> tuple[bytes, bytes, bytes, SelfCertificate | None]:
    """The serving certificate, its key and its CA (PEMs), and the keeper of the Secret
    they come from with --api-cert-secret."""
    if settings.ca_file and not settings.cert_file:
        raise ValueError("--api-ca-file is the CA of --api-cert-file: give both")
    if settings.cert_secret:
        if settings.cert_file or settings.key_file or settings.ca_file:
            raise ValueError("--api-cert-secret makes its own certificate: not with "
                             "--api-cert-file, --api-key-file or --api-ca-file")  # fmt: skip
        lifetimes = CertificateLifetimes(
            datetime.timedelta(seconds=settings.ca_validity),
            datetime.timedelta(seconds=settings.cert_validity),
        )
        kept = SelfCertificate(
            manager, namespace, settings.cert_secret, serving_hosts(settings.url, namespace),
            lifetimes, settings.ca_bundle_webhook,
        )  # fmt: skip
        material = await kept.load()
        return material.cert_pem, material.key_pem, material.ca_pem, kept
    if settings.cert_file or settings.key_file:
        if not (settings.cert_file and settings.key_file):
            raise ValueError("--api-cert-file and --api-key-file go together")
        cert_pem = await asyncio.to_thread(Path(settings.cert_file).read_bytes)
        key_pem = await asyncio.to_thread(Path(settings.key_file).read_bytes)
        # Every replica serves one certificate of one CA: the APIService's caBundle.
        ca_file = settings.ca_file or settings.cert_file
        return cert_pem, key_pem, await asyncio.to_thread(Path(ca_file).read_bytes), None
    cert_pem, key_pem = self_signed(_hosts(settings, namespace))
    return cert_pem, key_pem, cert_pem, None


def _follow_files(
    settings: ApiSettings, trust: FrontProxyTrust, served: ServedFiles
) -> CertificateFiles:
    """The given files, re-read as they change and served once they check out."""

    def serve_files(found: ServedFiles) -> None:
        _check_signed_by(found[0], found[2])
        trust.serve(found[0], found[1])

    files = CertificateFiles(settings.cert_file, settings.key_file, settings.ca_file, served,
                             serve_files, interval=settings.cert_reload_interval)  # fmt: skip
    files.start()
    return files


async def start_api(
    manager: ApiClient,
    settings: ApiSettings,
    handler_for: Callable[[FrontProxyTrust], RelayApi],
    *,
    namespace: str,
) -> RunningApi:
    """Serve the API with the handler ``handler_for`` makes of the front proxy's trust."""
    cert_pem, key_pem, ca_pem, kept = await _certificate(manager, settings, namespace)
    _check_signed_by(cert_pem, ca_pem)
    trust = FrontProxyTrust(manager, cert_pem, key_pem)
    trust.start()
    files: CertificateFiles | None = None
    if kept is not None:
        kept.follow(lambda renewed: _serve(trust, renewed))
    elif settings.cert_file:
        files = _follow_files(settings, trust, (cert_pem, key_pem, ca_pem))
    handler = handler_for(trust)
    server = ApiServer(settings.address, trust.context(), handler.handle,
                       write_timeout=settings.write_timeout)  # fmt: skip
    try:
        bound = await server.start()
    except BaseException:
        await trust.stop()
        if kept is not None:
            await kept.stop()
        if files is not None:
            await files.stop()
        raise
    return RunningApi(server, trust, bound[0], ca_pem.decode(), kept, files)


def _serve(trust: FrontProxyTrust, material: ServingMaterial) -> None:
    """The Secret's certificate from the next handshake on, once it checks out."""
    if trust.serving == material.cert_pem:
        return
    try:
        _check_signed_by(material.cert_pem, material.ca_pem)
        trust.serve(material.cert_pem, material.key_pem)
    except (ssl.SSLError, ValueError) as error:
        _log.warning("not serving the renewed API certificate: %s", error)
        return
    _log.info("serving the renewed API certificate", extra={"event": "api-certificate-loaded"})


def _check_signed_by(cert_pem: bytes, ca_pem: bytes) -> None:
    """ValueError unless the serving certificate verifies against the CA (a mismatched
    Secret would make the aggregator refuse the API; say so at start instead)."""
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


async def register(
    manager: ApiClient,
    namespace: str,
    api: RunningApi,
    defaults: Sequence[ManagedByDefault] = (),
    failure_policy: str = FAIL,
) -> None:
    """The leader's registration of this replica (``--api-register``): the Service, its
    EndpointSlice, the APIService and the managedBy webhook of the kinds ``defaults``
    names, retried until written or cancelled."""
    host, port = api.bound[0], api.bound[1]
    try:
        address = reachable_address(host)
    except ValueError as error:
        _log.warning("not registering APIService %s: %s", API_SERVICE_NAME, error)
        return
    registration = api_service(namespace, LOCAL_SERVICE, SERVICE_PORT, api.ca_pem)
    # The apiserver dials a webhook's URL itself (no aggregator routing): this address.
    webhooks = webhook_configuration(
        defaults, url_client_config(address, port, api.ca_pem), failure_policy
    ) if defaults else None  # fmt: skip
    delay = 1.0
    while True:
        try:
            for resource, body in (
                (SERVICES, local_service(namespace, port)),
                (ENDPOINT_SLICES, local_endpoints(namespace, address, port)),
            ):
                await manager.patch(
                    resource, LOCAL_SERVICE, body, namespace=namespace,
                    patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
                )  # fmt: skip
            await manager.patch(
                API_SERVICES, API_SERVICE_NAME, registration,
                patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
            )  # fmt: skip
            if webhooks is not None:
                await manager.patch(
                    MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION, webhooks,
                    patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
                )  # fmt: skip
        except ApiError as error:
            _log.warning("cannot register APIService %s: %s %s; retrying", API_SERVICE_NAME,
                         error.reason, error.message)  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        _log.info(
            "registered APIService %s -> %s/%s (%s:%d)%s", API_SERVICE_NAME, namespace,
            LOCAL_SERVICE, address, port,
            f" and MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION} (failurePolicy "
            f"{failure_policy})" if webhooks is not None else "",
            extra={"event": "api-registered"},
        )  # fmt: skip
        return


async def deregister(manager: ApiClient, api: RunningApi) -> None:
    """At a clean stop, the APIService goes if it is still this replica's (its caBundle):
    one left pointing at a closed port would make the manager's discovery incomplete
    (kubectl warns on every command). Best effort: another leader re-registers."""
    try:
        found = await manager.get(API_SERVICES, API_SERVICE_NAME)
        if (found.get("spec") or {}).get("caBundle") == api_service("", "", 0, api.ca_pem)["spec"][
            "caBundle"
        ]:
            await manager.delete(API_SERVICES, API_SERVICE_NAME)
    except ApiError as error:
        _log.info("left APIService %s registered: %s", API_SERVICE_NAME, error.reason)
