"""No kubeconfig content in the kube layer's errors (kube/redact.py, kube/api.py).

The libraries quote their input: YAML errors print the offending line,
lightkube names values and prints an exec plugin's stderr. Each kubeconfig
below carries a distinctive secret, asserted absent from every message and
from the exception's chain (a logged traceback would print it).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest
from lightkube.core.exceptions import ConfigError

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, KubeconfigError
from jobrelay.kube.redact import library_problem

SECRET = "s3cr3t-VALUE-4c8d21"


def no_secret(error: BaseException) -> str:
    message = str(error)
    assert SECRET not in message, message
    assert error.__cause__ is None and error.__suppress_context__, "the library's error is chained"
    return message


def config(user: dict[str, Any], cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster or {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("kubeconfig", "expected"),
    [
        (config({"client-certificate-data": b64(SECRET), "client-key-data": b64(SECRET)}),
         "certificate or key data cannot be loaded"),
        (config({"token": "t"}, {"server": "https://127.0.0.1:1", "certificate-authority-data": b64(SECRET)}),
         "certificate or key data cannot be loaded"),
        (config({"token": "t"}, {"server": 6443, "x": SECRET}), "Expected `str`, got `int` at $.server"),
        ({"clusters": SECRET}, "invalid kubeconfig: unusable"),
        (config({"auth-provider": {"name": SECRET}}), "auth-provider is not supported"),
    ],
)  # fmt: skip
def test_a_kubeconfig_the_client_cannot_use_is_named_without_its_content(
    kubeconfig: dict[str, Any], expected: str
) -> None:
    with pytest.raises(KubeconfigError) as raised:
        ApiClient.from_kubeconfig_dict(kubeconfig)
    assert expected in no_secret(raised.value)


@pytest.mark.parametrize(
    "text",
    [
        f"users:\n- user: {{token: {SECRET}: x}}\n",
        f"users:\n- user:\n    token: *{SECRET}\n",
        f"token: !!{SECRET} x\n",
        f"clusters: {SECRET}\n",
    ],
)
def test_an_unreadable_kubeconfig_file_is_named_without_its_content(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeconfigError) as raised:
        ApiClient.from_kubeconfig(path)
    assert str(path) in no_secret(raised.value)


def exec_config(tmp_path: Path, script: str) -> dict[str, Any]:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(script)
    return config(
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": [str(plugin)],
            }
        }
    )


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (f"import sys\nsys.stderr.write('token {SECRET} expired')\nsys.exit(3)\n",
         "exec credential plugin: the exec credential plugin exited with code 3"),
        (f"print('{SECRET}')\n", "its output is not an ExecCredential"),
        (f"print('{{\"status\": {{\"tok\": \"{SECRET}\"}}}}')\n", "its output is not an ExecCredential"),
    ],
)  # fmt: skip
async def test_a_failing_exec_plugin_is_named_without_its_output(
    tmp_path: Path, script: str, expected: str
) -> None:
    # The plugin runs (and fails) before any request is sent: no server is needed.
    async with ApiClient.from_kubeconfig_dict(exec_config(tmp_path, script)) as client:
        with pytest.raises(ApiError) as raised:
            await client.version()
    assert raised.value.reason == "Unauthorized"
    assert expected in no_secret(raised.value)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConfigError(f"Context '{SECRET}' not found"), "the context is not in the kubeconfig"),
        (ConfigError(f"auth exec api version {SECRET} not implemented"), "unsupported exec"),
        (ConfigError(f"Token file /{SECRET} not found"), "the tokenFile does not exist"),
        (ConfigError(f"something new about {SECRET}"), "unusable (ConfigError)"),
        (KeyError(SECRET), "unusable (KeyError)"),
        (TypeError(SECRET), "unusable (TypeError)"),
    ],
)
def test_library_errors_are_reduced_to_what_and_where(error: Exception, expected: str) -> None:
    said = library_problem(error)
    assert expected in said and SECRET not in said, said
