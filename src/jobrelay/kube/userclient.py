"""A client of the controller's HTTPS API that carries the user's own manager credentials.

The user's kubeconfig context says who they are (a bearer token, an exec
plugin's token, or a client certificate); the same credentials go to the
controller's API, which checks them against the manager. The API's own
certificate is trusted from the CA it publishes, never from the kubeconfig.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
from lightkube.config.client_adapter import user_auth, user_cert
from lightkube.config.kubeconfig import KubeConfig

from jobrelay.kube.connecting import CONFIG_ERRORS
from jobrelay.kube.errors import KubeconfigError
from jobrelay.kube.redact import library_problem

__all__ = ["RelayClient", "RelayError", "context_namespace"]


class RelayError(Exception):
    """The API refused (code, reason and message from its Status), or did not answer (code 0)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


def _refusal(code: int, body: bytes) -> RelayError:
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        return RelayError(code, str(status.get("reason") or ""), str(status.get("message") or ""))
    return RelayError(code, f"HTTP {code}", body[:300].decode("utf-8", "replace").strip())


class RelayClient:
    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http

    @classmethod
    def for_user(
        cls,
        url: str,
        ca_pem: str | None,
        *,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        timeout: float = 30.0,
    ) -> RelayClient:
        """A client of ``url`` with the credentials of the kubeconfig's ``context``
        (default: like kubectl), trusting ``ca_pem`` (None: the system's CAs)."""
        try:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
            single = config.get(context_name=context)
            tls = (
                ssl.create_default_context(cadata=ca_pem)
                if ca_pem
                else ssl.create_default_context()
            )
            cert = user_cert(single.user, single.abs_file) if single.user else None
            if cert:
                tls.load_cert_chain(*cert)
            auth = user_auth(single.user) if single.user else None
        except ssl.SSLError as exc:
            raise KubeconfigError(f"cannot load certificates: {exc.reason or exc}") from None
        except CONFIG_ERRORS as exc:
            raise KubeconfigError(f"cannot use the kubeconfig: {library_problem(exc)}") from None
        http = httpx2.AsyncClient(
            base_url=url,
            verify=tls,
            auth=auth,
            timeout=httpx2.Timeout(timeout, read=None),
            headers={"Accept": "application/json, text/plain"},
            trust_env=False,
        )
        return cls(http)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get_json(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        try:
            response = await self._http.get(path, params=dict(params))
        except httpx2.HTTPError as exc:
            raise RelayError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise _refusal(response.status_code, response.content)
        found = response.json()
        if not isinstance(found, dict):
            raise RelayError(200, "InvalidResponse", "the answer is not a JSON object")
        return found

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """The body of ``path`` as it arrives; RelayError for a refusal."""
        request = self._http.build_request("GET", path, params=dict(params))
        try:
            response = await self._http.send(request, stream=True)
        except httpx2.HTTPError as exc:
            raise RelayError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        try:
            if response.status_code != 200:
                raise _refusal(response.status_code, await response.aread())
            yield response.aiter_bytes()
        except httpx2.HTTPError as exc:
            raise RelayError(0, "Unreachable", f"the stream broke: {type(exc).__name__}") from None
        finally:
            await response.aclose()


def context_namespace(kubeconfig: str | Path | None, context: str | None) -> str:
    """The namespace of the kubeconfig's context, like kubectl's default (else "default")."""
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        namespace = config.get(context_name=context).namespace
    except CONFIG_ERRORS:
        return "default"
    return str(namespace or "default")
