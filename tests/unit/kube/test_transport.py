"""Which credentials the direct path can carry, and how aiohttp's errors read."""

from __future__ import annotations

import aiohttp
import httpx2
import pytest
from lightkube.config.client_adapter import BearerAuth, ExecAuth
from lightkube.config.models import UserExec

from jobrelay.kube.transport import _translated, direct_auth_headers

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
