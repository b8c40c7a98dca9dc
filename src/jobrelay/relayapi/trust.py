"""The front proxy the API trusts, kept current from the manager, and its TLS context.

An informer of ``kube-system/extension-apiserver-authentication`` (this one
ConfigMap, by a field selector: the ``extension-apiserver-authentication-reader``
Role grants exactly it) re-reads the apiserver's ``requestheader-*`` settings
when they change, never per request. The server's one TLS context switches each
handshake to the context of the current ``requestheader-client-ca-file`` (its
server-name callback, called with or without SNI), so a rotated front-proxy CA
is trusted from the next connection on, and the old one no more. The rules are
in ``trust_rules.py``. A renewed serving certificate (:meth:`FrontProxyTrust.serve`,
from the files or the Secret it was read from) rebuilds both contexts the same way:
new handshakes get it, open connections keep theirs.
"""

from __future__ import annotations

import logging
import ssl

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import CONFIGMAPS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.relayapi.trust_rules import AUTHENTICATION_CONFIGMAP, FrontProxy, front_proxy
from jobrelay.web.tls import server_context

__all__ = ["FrontProxyTrust"]

_log = logging.getLogger(__name__)


class FrontProxyTrust:
    """The current :class:`FrontProxy` (None until it is known) and the TLS context that
    verifies its client certificates."""

    def __init__(self, manager: ApiClient, cert_pem: bytes, key_pem: bytes) -> None:
        namespace, name = AUTHENTICATION_CONFIGMAP
        self._key = f"{namespace}/{name}"
        self._cert_pem, self._key_pem = cert_pem, key_pem
        self.current: FrontProxy | None = None
        # Until the front proxy is known no CA verifies a client certificate: every
        # request is then refused (401, or its certificate at the handshake).
        self._untrusted = _asking(server_context(cert_pem, key_pem, None))
        self._context = self._untrusted
        self._server = _asking(server_context(cert_pem, key_pem, None))
        self._server.sni_callback = self._switch
        self._informer = Informer(
            manager, CONFIGMAPS, namespace=namespace, field_selector=f"metadata.name={name}"
        )
        self._informer.add_handler(self._changed)

    @property
    def serving(self) -> bytes:
        """The serving certificate (PEM) new handshakes get."""
        return self._cert_pem

    def serve(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Serve ``cert_pem`` from the next handshake on (ssl.SSLError, ValueError when the
        pair does not load: the current one is kept)."""
        untrusted = _asking(server_context(cert_pem, key_pem, None))
        context = untrusted
        if self.current is not None:
            context = server_context(cert_pem, key_pem, self.current.client_ca)
        self._cert_pem, self._key_pem = cert_pem, key_pem
        self._untrusted, self._context = untrusted, context

    def context(self) -> ssl.SSLContext:
        """The server's TLS context: each handshake switches to the current front proxy's."""
        return self._server

    def _switch(self, connection: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        connection.context = self._context

    def start(self) -> None:
        self._informer.start()

    async def stop(self) -> None:
        await self._informer.stop()

    async def wait_synced(self) -> None:
        await self._informer.wait_synced()

    def _changed(self, _event: InformerEvent) -> None:
        configmap = self._informer.get(self._key)
        found = front_proxy((configmap or {}).get("data"))
        if isinstance(found, str):
            self._distrust(found)
            return
        if self.current == found:
            return
        try:
            context = server_context(self._cert_pem, self._key_pem, found.client_ca)
        except (ssl.SSLError, ValueError) as error:
            self._distrust(f"its requestheader-client-ca-file is not a PEM CA ({error})")
            return
        self.current, self._context = found, context
        _log.info(
            "trusting the manager's front proxy (allowed names: %s)",
            ", ".join(found.allowed_names) or "any the CA signed",
            extra={"event": "front-proxy-trusted"},
        )

    def _distrust(self, why: str) -> None:
        _log.warning("the API trusts no front proxy: %s", why)
        self.current = None
        self._context = self._untrusted


def _asking(context: ssl.SSLContext) -> ssl.SSLContext:
    """``context``, asking every client for a certificate (verified if sent): the same in
    every context, so a switch changes only the CA."""
    context.verify_mode = ssl.CERT_OPTIONAL
    return context
