"""Whom the API trusts: the manager's front proxy, and the user it names (pure).

The API is an aggregated API: the manager's kube-apiserver authenticates the
user, then forwards the request with its front-proxy client certificate and the
user in headers. What to trust is what the apiserver publishes in
``kube-system/extension-apiserver-authentication`` (``requestheader-*``), read
here as a :class:`FrontProxy`; :func:`identify` is the check every request
passes, as Kubernetes' request-header authenticator makes it: a certificate
that verified against ``requestheader-client-ca-file`` (the TLS layer's work),
its one CN (a subject with several is refused: readers disagree on which counts)
among ``requestheader-allowed-names`` (none listed: any), and then the user,
groups and extras from the headers the ConfigMap names (the user from
``requestheader-username-headers`` only, never from the certificate). Anything
else is 401.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from jobrelay.relayapi.route_rules import User

__all__ = [
    "AUTHENTICATION_CONFIGMAP",
    "FrontProxy",
    "common_name",
    "front_proxy",
    "identify",
]

# Where the apiserver publishes how to trust it (namespace, name).
AUTHENTICATION_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True, slots=True)
class FrontProxy:
    """The ``requestheader-*`` settings of the manager's apiserver."""

    client_ca: str  # PEM: the front proxy's client certificates verify against it
    allowed_names: tuple[str, ...] = ()  # empty: any CN that CA signed
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()


def _names(data: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """A JSON list of strings under ``key`` (as the apiserver writes them); None when it
    is missing or not such a list."""
    text = data.get(key)
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(item for item in value if item)


def front_proxy(data: Mapping[str, Any] | None) -> FrontProxy | str:
    """The front proxy of the ConfigMap's ``data``, or why there is none (a sentence)."""
    namespace, name = AUTHENTICATION_CONFIGMAP
    where = f"{namespace}/{name}"
    if not data or not str(data.get("requestheader-client-ca-file") or "").strip():
        return (
            f"{where} has no requestheader-client-ca-file: start the manager's apiserver "
            "with the aggregation layer's --requestheader-* flags"
        )
    usernames = _names(data, "requestheader-username-headers")
    if not usernames:
        return f"{where} names no requestheader-username-headers"
    return FrontProxy(
        client_ca=str(data["requestheader-client-ca-file"]),
        allowed_names=_names(data, "requestheader-allowed-names") or (),
        username_headers=usernames,
        group_headers=_names(data, "requestheader-group-headers") or (),
        extra_prefixes=_names(data, "requestheader-extra-headers-prefix") or (),
        uid_headers=_names(data, "requestheader-uid-headers") or (),
    )


def common_name(peercert: Mapping[str, Any] | None) -> str | None:
    """The subject CN of a client certificate the TLS layer verified (``getpeercert()``);
    None without a certificate; ``""`` when its subject has no CN or several.

    Several CNs are never read as one: Go's x509 (the apiserver's) takes the last,
    another reader the first, so a subject ``CN=front-proxy-client, CN=someone`` would
    pass as whichever an allowed name is. Such a certificate names no front proxy."""
    if not peercert:
        return None
    names = [
        str(value)
        for rdn in peercert.get("subject") or ()
        for key, value in rdn
        if key == "commonName"
    ]
    return names[0] if len(names) == 1 else ""


def _first(headers: Sequence[tuple[str, str]], names: Sequence[str]) -> str:
    for wanted in names:
        for name, value in headers:
            if name.lower() == wanted.lower() and value.strip():
                return value.strip()
    return ""


def _all(headers: Sequence[tuple[str, str]], names: Sequence[str]) -> list[str]:
    return [
        value.strip()
        for wanted in names
        for name, value in headers
        if name.lower() == wanted.lower() and value.strip()
    ]


def _extras(headers: Sequence[tuple[str, str]], prefixes: Sequence[str]) -> dict[str, list[str]]:
    extra: dict[str, list[str]] = {}
    for prefix in prefixes:
        for name, value in headers:
            if len(name) > len(prefix) and name.lower().startswith(prefix.lower()):
                # Kubernetes lower-cases the key, then percent-decodes it.
                key = unquote(name[len(prefix) :].lower())
                extra.setdefault(key, []).append(value.strip())
    return extra


def identify(
    trust: FrontProxy | None,
    verified_cn: str | None,
    headers: Sequence[tuple[str, str]],
) -> User | str:
    """The user a request speaks for, or why it is not trusted (a 401's message).

    ``verified_cn`` is the CN of the client certificate the TLS layer verified against
    ``trust.client_ca``; None when the caller sent none."""
    if trust is None:
        return "the API does not know the manager's front proxy yet; try again"
    if verified_cn is None:
        return (
            "only the manager's apiserver may call this API: send the request through it "
            "(kubectl get --raw /apis/api.jobrelay.dev/v1alpha1/...)"
        )
    if not verified_cn:
        return "the client certificate does not name exactly one CN: it is no front proxy"
    if trust.allowed_names and verified_cn not in trust.allowed_names:
        return f'the client certificate "{verified_cn}" is not an allowed front proxy'
    name = _first(headers, trust.username_headers)
    if not name:
        return "the front proxy named no user"
    extra = _extras(headers, trust.extra_prefixes)
    return User(
        name,
        tuple(_all(headers, trust.group_headers)),
        _first(headers, trust.uid_headers),
        {key: tuple(values) for key, values in extra.items()},
    )
