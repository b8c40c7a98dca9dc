"""A kubeconfig's inline certificates (``*-data``) loaded in memory, not from temporary files.

lightkube turns every ``certificate-authority-data``, ``client-certificate-data`` and
``client-key-data`` into a named temporary file (OpenSSL reads chains from files).
A pod with a read-only root and no writable /tmp has none, so every worker's
kubeconfig (inline by rule) failed to load there. Here the CA goes to OpenSSL as
``cadata`` and the client chain through :func:`jobrelay.web.tls.load_cert_chain`
(anonymous memory files); lightkube gets the config without the inline fields and
builds the rest (server, credential) as before.
"""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import msgspec
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import SingleConfig

from jobrelay.web.tls import load_cert_chain

__all__ = ["without_inline_certs"]


def without_inline_certs(
    single: SingleConfig, *, trust_env: bool
) -> tuple[SingleConfig, ssl.SSLContext | None]:
    """``single`` stripped of its inline certificates, and the TLS context they make
    (None when it has none: lightkube's own context is then the right one)."""
    cluster, user = single.cluster, single.user
    ca_data = None if cluster.certificate_auth else cluster.certificate_auth_data
    cert_data = user is not None and bool(user.client_cert_data or user.client_key_data)
    if not ca_data and not cert_data:
        return single, None
    bare_cluster = msgspec.structs.replace(cluster, certificate_auth_data=None)
    bare_user = user
    if user is not None:
        bare_user = msgspec.structs.replace(
            user, client_cert_data=None, client_key_data=None, client_cert=None, client_key=None
        )
    if ca_data:
        # As lightkube: a CA given is verified against, insecure-skip-tls-verify or not.
        context = ssl.create_default_context(cadata=base64.b64decode(ca_data).decode())
    else:  # a CA file, the system's, or none: lightkube's rule, without client certificates
        context = verify_cluster(bare_cluster, bare_user, single.abs_file, trust_env=trust_env)
    if user is not None and (user.client_cert or user.client_cert_data):
        load_cert_chain(
            context,
            _pem(user.client_cert_data, user.client_cert, single),
            _pem(user.client_key_data, user.client_key, single),
        )
    bare = single._replace(cluster=bare_cluster, user=bare_user)
    return bare, context


def _pem(data: str | None, file: str | None, single: SingleConfig) -> bytes:
    if data:
        return base64.b64decode(data)
    if not file:
        raise ValueError("a client certificate needs its key (and a key its certificate)")
    return Path(single.abs_file(file)).read_bytes()
