"""Which credentials the direct path can carry, and how aiohttp's errors read."""

from __future__ import annotations

import aiohttp
import httpx2
import pytest
from lightkube.config.client_adapter import BearerAuth, ExecAuth
from lightkube.config.models import UserExec

from jobrelay.kube.transport import _translated, direct_auth_headers, env_proxy

URL = "https://127.0.0.1:6443"


def test_no_credential_adds_no_header() -> None:
    assert direct_auth_headers(None, URL) == {}


def test_a_token_is_one_fixed_header() -> None:
    assert direct_auth_headers(BearerAuth("abc"), URL) == {"Authorization": "Bearer abc"}


def test_basic_credentials_are_one_fixed_header() -> None:
    headers = direct_auth_headers(httpx2.BasicAuth("user", "pass"), URL)
    assert headers == {"Authorization": "Basic dXNlcjpwYXNz"}


def test_an_exec_plugin_keeps_its_own_flow() -> None:
    plugin = UserExec(apiVersion="client.authentication.k8s.io/v1", command="true")
    assert direct_auth_headers(ExecAuth(plugin), URL) is None


@pytest.mark.parametrize(
    ("error", "translated"),
    [
        (aiohttp.ConnectionTimeoutError("slow"), httpx2.ConnectTimeout),
        (aiohttp.SocketTimeoutError("quiet"), httpx2.ReadTimeout),
        (TimeoutError(), httpx2.ReadTimeout),
        (aiohttp.ServerDisconnectedError(), httpx2.RemoteProtocolError),
        (aiohttp.ClientPayloadError("cut"), httpx2.RemoteProtocolError),
        (aiohttp.ClientOSError(32, "Broken pipe"), httpx2.WriteError),
    ],
)
def test_aiohttp_errors_read_as_httpx2s(error: BaseException, translated: type) -> None:
    result = _translated(error, None, "send")
    assert type(result) is translated
    assert str(result)


@pytest.mark.parametrize(
    ("env", "proxy"),
    [
        ({}, None),
        ({"HTTPS_PROXY": "http://proxy.example:3128"}, "http://proxy.example:3128"),
        ({"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "127.0.0.1"}, None),
        ({"HTTP_PROXY": "http://proxy.example:3128"}, None),  # not for https
    ],
)
def test_the_proxy_is_read_once_from_the_environment_as_kubectl_does(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], proxy: str | None
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert env_proxy(URL) == proxy
