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

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import DEFAULT_KUBECONFIG, KubeConfig
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
    "context_namespace",
    "environment_kubeconfig",
    "kubeconfig_file",
    "kubeconfig_of",
    "merged_kubeconfig",
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
    # (ResponseTooLarge) instead of filling memory. An object is at most ~1.5 MiB in etcd
    # (~9 MiB as JSON, where Go writes "<" as six bytes): a LIST page past the cap is asked
    # again in smaller pages (ApiClient.list), so tenants' big objects cannot stop a list.
    max_body_bytes: int = 64 * 1024 * 1024
    max_watch_line_bytes: int = 16 * 1024 * 1024


# What building a client from a kubeconfig may raise (ssl.SSLError is an OSError;
# msgspec's ValidationError and binascii.Error are ValueErrors).
CONFIG_ERRORS = (LightkubeConfigError, OSError, ValueError, KeyError, TypeError, yaml.YAMLError)


def kubeconfig_file(path: str | Path) -> KubeConfig:
    """The kubeconfig in the file at ``path``; KubeconfigError when it cannot be read."""
    return _kubeconfig_files([Path(path).expanduser()], origin=str(path), skip_missing=False)


def environment_kubeconfig() -> KubeConfig:
    """Like kubectl: ``$KUBECONFIG`` (a list of files, merged), else ``~/.kube/config``,
    else the in-cluster service account."""
    paths, origin = _environment_paths()
    if not paths:
        try:
            return KubeConfig.from_service_account()
        except CONFIG_ERRORS as exc:
            raise KubeconfigError(
                f"cannot use the in-cluster service account: {library_problem(exc)}"
            ) from None
    # kubectl skips the listed files that do not exist; a single missing one is an error.
    return _kubeconfig_files(paths, origin=origin, skip_missing=len(paths) > 1)


def _environment_paths() -> tuple[list[Path], str]:
    """The files kubectl would read (none: in-cluster), and how to name them."""
    listed = os.environ.get("KUBECONFIG", "")
    paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    if paths:
        return paths, f"$KUBECONFIG ({listed})"
    home = Path(DEFAULT_KUBECONFIG).expanduser()
    return ([home] if home.exists() or not _in_cluster() else []), str(home)


def context_namespace(path: Path | None, context: str | None) -> str | None:
    """The namespace of ``context`` (default: the current one) in the kubeconfig kubectl
    would read (``path``, else the environment's), or in a pod its own; None when it sets
    none or cannot be read (the command then says why when it connects)."""
    paths, origin = ([path], str(path)) if path else _environment_paths()
    if not paths:
        try:
            return _SERVICE_ACCOUNT_TOKEN.with_name("namespace").read_text().strip() or None
        except OSError:
            return None
    try:
        merged = _merged_files(paths, origin=origin, skip_missing=len(paths) > 1)
    except KubeconfigError:
        return None
    name = context or merged.get("current-context")
    for entry in merged["contexts"]:
        if entry.get("name") == name and isinstance(entry.get("context"), Mapping):
            namespace = entry["context"].get("namespace")
            return str(namespace) if namespace else None
    return None


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and _SERVICE_ACCOUNT_TOKEN.exists()


_SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
_FIX = "point --kubeconfig or $KUBECONFIG at a kubeconfig with a context (as kubectl uses)"


def _merged_files(paths: list[Path], *, origin: str, skip_missing: bool) -> dict[str, Any]:
    """The kubeconfig files at ``paths`` read and merged (:func:`merged_kubeconfig`), with
    the first file's path under ``"fname"``; KubeconfigError when one cannot be read."""
    documents: list[tuple[Path, Any]] = []
    for path in paths:
        try:
            text = path.read_text()
        except FileNotFoundError:
            if skip_missing:
                continue
            raise KubeconfigError(f"kubeconfig {path} does not exist: {_FIX}") from None
        except OSError as exc:
            raise KubeconfigError(
                f"cannot read kubeconfig {path}: {library_problem(exc)}"
            ) from None
        try:
            documents.append((path, yaml.safe_load(text)))
        except yaml.YAMLError as exc:
            raise KubeconfigError(
                f"kubeconfig {path} is not YAML: {library_problem(exc)}"
            ) from None
    for path, document in documents:
        if document is not None and not isinstance(document, Mapping):
            raise KubeconfigError(
                f"kubeconfig {path} is not a kubeconfig (a mapping): {_FIX}"
            ) from None
        for key in ("clusters", "contexts", "users"):
            listed = (document or {}).get(key)
            if listed is not None and not isinstance(listed, list):
                raise KubeconfigError(f"kubeconfig {path}: {key} is not a list: {_FIX}") from None
    if not documents:
        raise KubeconfigError(f"no kubeconfig found: none of {origin} exists: {_FIX}") from None
    return {**merged_kubeconfig(documents), "fname": documents[0][0]}


def _kubeconfig_files(paths: list[Path], *, origin: str, skip_missing: bool) -> KubeConfig:
    merged = _merged_files(paths, origin=origin, skip_missing=skip_missing)
    if not merged["contexts"]:
        what = "has no contexts" if merged["clusters"] or merged["users"] else "is empty"
        raise KubeconfigError(f"kubeconfig {origin} {what}: {_FIX}") from None
    try:
        fname = merged.pop("fname")
        config: KubeConfig = KubeConfig.from_dict(merged, fname=fname)
    except CONFIG_ERRORS as exc:
        raise KubeconfigError(f"cannot load kubeconfig {origin}: {library_problem(exc)}") from None
    return config


# Fields naming a file, resolved against the kubeconfig that holds them (as kubectl does).
_FILE_FIELDS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


def merged_kubeconfig(documents: Sequence[tuple[Path, Any]]) -> dict[str, Any]:
    """Kubeconfig files merged as kubectl merges ``$KUBECONFIG``: a cluster, context or
    user named in several files is the first file's; ``current-context`` is the first one
    set. Relative file paths are made absolute against their own file's directory."""
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    seen: dict[str, set[str]] = {key: set() for key in merged}
    current = None
    for path, document in documents:
        if not isinstance(document, Mapping):
            continue  # an empty file adds nothing, as with kubectl
        current = current or document.get("current-context") or None
        for key in merged:
            for entry in document.get(key) or []:
                if not isinstance(entry, Mapping) or entry.get("name") in seen[key]:
                    continue
                seen[key].add(str(entry.get("name")))
                merged[key].append(_absolute_files(key, dict(entry), path.parent))
    if current:
        merged["current-context"] = current
    return merged


def _absolute_files(key: str, entry: dict[str, Any], directory: Path) -> dict[str, Any]:
    inner_key, fields = _FILE_FIELDS.get(key, ("", ()))
    inner = entry.get(inner_key)
    if not isinstance(inner, Mapping):
        return entry
    inner = dict(inner)
    for field in fields:
        value = inner.get(field)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            inner[field] = str(directory / value)
    return {**entry, inner_key: inner}


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
