"""From a kubeconfig to a connection: the settings, the TLS, the credential, the pool.

lightkube reads the kubeconfig (files, inline data, tokens, client
certificates, exec plugins, the in-cluster service account) and gives the
httpx2 parameters; the bytes go over one aiohttp pool per apiserver
(:mod:`jobrelay.kube.transport`), with a direct path for plain requests when
the credential is one fixed header. :class:`~jobrelay.kube.client.ApiClient`'s
``from_kubeconfig``, ``from_environment`` and ``from_kubeconfig_dict`` build
their client on what :func:`connect` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

import jobrelay
from jobrelay.kube.errors import KubeconfigError
from jobrelay.kube.inline_certs import without_inline_certs
from jobrelay.kube.redact import library_problem
from jobrelay.kube.transport import AiohttpTransport, DirectSender, direct_auth_headers, env_proxy

__all__ = [
    "CONFIG_ERRORS",
    "ApiOptions",
    "Connection",
    "connect",
    "environment_kubeconfig",
    "kubeconfig_file",
    "kubeconfig_of",
]


@dataclass(frozen=True, slots=True)
class ApiOptions:
    """Connection settings of one ApiClient. Timeouts are in seconds."""

    connect_timeout: float = 5.0
    # Bounds every non-watch request (read, write and waiting for a pooled connection).
    request_timeout: float = 30.0
    # Each open watch holds one HTTP/1.1 connection, so this caps watches plus requests.
    max_connections: int = 100
    # Idle connections are kept this long: httpx's default of 5 s made a busy
    # controller redo TLS handshakes constantly (most of its CPU, under py-spy).
    # Below the apiserver's own idle timeout, so it never closes one under us.
    keepalive_expiry: float = 60.0
    http2: bool = False
    # Honour HTTP(S)_PROXY / NO_PROXY from the environment, as kubectl does.
    trust_env: bool = True
    user_agent: str = f"jobrelay/{jobrelay.__version__}"
    # Asked before every write (any method but GET); False refuses it with WriteFenced.
    # A standby, or a leader past its renew deadline, must not write (leader election).
    write_fence: Callable[[], bool] | None = None
    # The longest answer read (a page of a LIST, a GET, an error's body) and the longest
    # line of a watch: a worker's apiserver that sends without end fails that request
    # (ResponseTooLarge) instead of filling memory. An object is at most ~1.5 MiB in etcd.
    max_body_bytes: int = 64 * 1024 * 1024
    max_watch_line_bytes: int = 16 * 1024 * 1024


# What building a client from a kubeconfig may raise (ssl.SSLError is an OSError;
# msgspec's ValidationError and binascii.Error are ValueErrors).
CONFIG_ERRORS = (LightkubeConfigError, OSError, ValueError, KeyError, TypeError, yaml.YAMLError)


def kubeconfig_file(path: str | Path) -> KubeConfig:
    """The kubeconfig in the file at ``path``; KubeconfigError when it cannot be read."""
    try:
        return KubeConfig.from_file(path)
    except CONFIG_ERRORS as exc:
        raise KubeconfigError(f"cannot load kubeconfig {path}: {library_problem(exc)}") from None


def environment_kubeconfig() -> KubeConfig:
    """Like kubectl: ``$KUBECONFIG``, else ``~/.kube/config``, else the in-cluster service account."""
    try:
        return KubeConfig.from_env()
    except CONFIG_ERRORS as exc:
        raise KubeconfigError(
            "no kubeconfig found ($KUBECONFIG, ~/.kube/config, in-cluster): " + library_problem(exc)
        ) from None


def kubeconfig_of(kubeconfig: Mapping[str, Any]) -> KubeConfig:
    """An already parsed kubeconfig (e.g. from a Secret) as lightkube's.

    Certificates and keys must be inline (``*-data``): there is no file to
    resolve relative paths against.
    """
    try:
        return KubeConfig.from_dict(dict(kubeconfig))
    except CONFIG_ERRORS as exc:
        raise KubeconfigError(f"invalid kubeconfig: {library_problem(exc)}") from None


@dataclass(frozen=True, slots=True)
class Connection:
    """What a client sends through: httpx2 (streams, credential flows) and the direct path."""

    http: httpx2.AsyncClient
    # Plain reads and writes skip httpx2 (see kube/transport.py); None when the
    # credential must run per request (an exec plugin) or over HTTP/2.
    direct: DirectSender | None
    context: str  # the kubeconfig context's name


def connect(config: KubeConfig, context: str | None, options: ApiOptions) -> Connection:
    """A connection to the apiserver of ``context`` (default: the current context)."""
    timeout = httpx2.Timeout(options.request_timeout, connect=options.connect_timeout)
    try:
        # Inline certificates in memory: lightkube would write them to temporary files.
        single, inline_tls = without_inline_certs(
            config.get(context_name=context), trust_env=options.trust_env
        )
        # lightkube's client_adapter.AsyncClient() would build the same client
        # but cannot pass pool limits or default headers; its httpx_params()
        # gives us the part that matters (TLS, client certs, token/exec auth).
        params = ConnectionParams(
            timeout=timeout, trust_env=options.trust_env, http2=options.http2
        ).httpx_params(single)
        if inline_tls is not None:
            params["verify"] = inline_tls
        headers = {"User-Agent": options.user_agent, "Accept": "application/json"}
        direct = None
        if not options.http2:
            transport = AiohttpTransport(
                params["verify"],
                max_connections=options.max_connections,
                keepalive_expiry=options.keepalive_expiry,
                proxy=env_proxy(params["base_url"]) if options.trust_env else None,
            )
            params["transport"] = transport
            auth = direct_auth_headers(params["auth"], params["base_url"])
            if auth is not None:
                direct = DirectSender(
                    transport,
                    params["base_url"],
                    {**headers, **auth},
                    connect_timeout=options.connect_timeout,
                )
        http = httpx2.AsyncClient(
            **params,
            limits=httpx2.Limits(
                max_connections=options.max_connections,
                max_keepalive_connections=options.max_connections,
                keepalive_expiry=options.keepalive_expiry,
            ),
            headers=headers,
        )
    except CONFIG_ERRORS as exc:
        raise KubeconfigError(
            f"cannot use kubeconfig context {context!r}: {library_problem(exc)}"
        ) from None
    return Connection(http, direct, str(single.context_name))
