"""`jobrelay logs` and `describe` when the aggregated API is not registered (the manager
answers 404 for its group) or registered but not available (503): one line saying which
and what to do, a non-zero exit, never `404 page not found`, never a traceback. And a
worker's refusal of a pod's log inside the answer: an error on stderr and a non-zero
exit, the other pods' logs still printed."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner

from jobrelay.cli.logs import EXIT_FAILED, EXIT_FORBIDDEN, EXIT_NOT_FOUND, logs
from jobrelay.kube.client import ApiClient
from jobrelay.relayapi import user_client
from jobrelay.relayapi.route_rules import RelayError

_PLAIN = {"content-type": "text/plain; charset=utf-8"}
_JSON = {"content-type": "application/json"}


def _status(code: int, reason: str, message: str) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}  # fmt: skip
    return json.dumps(body).encode()


# What a real v1.35 manager answers for each state of the APIService.
NOT_REGISTERED = httpx2.Response(404, headers=_PLAIN, content=b"404 page not found\n")
NOT_REGISTERED_STATUS = httpx2.Response(
    404, headers=_JSON,
    content=_status(404, "NotFound", "the server could not find the requested resource"),
)  # fmt: skip
NOT_AVAILABLE = httpx2.Response(503, headers=_PLAIN, content=b"service unavailable\n")
NOT_REACHED = httpx2.Response(
    503, headers=_PLAIN,
    content=b'Error trying to reach service: dial tcp 127.0.0.1:1: connect: connection refused',
)  # fmt: skip
# The controller's own answer: a workload it has not placed.
NOT_PLACED = httpx2.Response(
    404, headers=_JSON, content=_status(404, "NotPlaced", 'Job "t" is not placed on a worker yet')
)


@pytest.fixture
def answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """Makes the manager answer every request with the response given; the kubeconfig."""

    def use(response: httpx2.Response) -> str:
        def handle(_request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(
                response.status_code, headers=response.headers, content=response.content
            )

        def client(*_args: Any, **_kwargs: Any) -> ApiClient:
            http = httpx2.AsyncClient(
                transport=httpx2.MockTransport(handle), base_url="https://127.0.0.1:6443"
            )
            return ApiClient(http, cluster="manager")

        monkeypatch.setattr(user_client.ApiClient, "from_kubeconfig", client)
        path = tmp_path / "kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
            "users: [{name: u, user: {token: t}}]\n"
            "contexts: [{name: c, context: {cluster: k, user: u, namespace: team-a}}]\n"
        )
        return str(path)

    return use


@pytest.mark.parametrize(
    ("response", "words"),
    [
        (NOT_REGISTERED, "not registered on this cluster"),
        (NOT_REGISTERED_STATUS, "not registered on this cluster"),
        (NOT_AVAILABLE, "registered but not available"),
        (NOT_REACHED, "registered but not available"),
    ],
)
@pytest.mark.parametrize("args", [["t"], ["rayjob/t"], ["t", "--all-pods", "-f"]])
def test_a_missing_or_unavailable_api_is_one_line_saying_which_and_what_to_do(
    answer: Any, response: httpx2.Response, words: str, args: list[str]
) -> None:
    kubeconfig = answer(response)
    result = CliRunner().invoke(logs, ["--kubeconfig", kubeconfig, *args])
    assert result.exit_code == EXIT_FAILED, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert words in line and "page not found" not in line
    assert "Traceback" not in result.stderr
    # What to do: register it, or see why it is not available.
    if "not registered" in words:
        assert "--api-register" in line and "chart" in line
    else:
        assert "kubectl get apiservice v1alpha1.api.jobrelay.dev" in line


def test_the_controllers_own_not_found_is_not_taken_for_a_missing_api(answer: Any) -> None:
    result = CliRunner().invoke(logs, ["--kubeconfig", answer(NOT_PLACED), "t"])
    assert result.exit_code == EXIT_NOT_FOUND
    assert "not placed" in result.stderr and "not registered" not in result.stderr


@pytest.mark.parametrize(
    ("response", "reason"),
    [(NOT_REGISTERED, "NoAPI"), (NOT_AVAILABLE, "APIUnavailable"), (NOT_PLACED, "NotPlaced")],
)
async def test_describe_says_the_same_of_the_worker_side(
    answer: Any, response: httpx2.Response, reason: str
) -> None:
    kubeconfig = answer(response)
    with pytest.raises(RelayError) as raised:
        await user_client.fetch_mirror("team-a", "t", "Job", kubeconfig=kubeconfig)
    assert raised.value.reason == reason


@pytest.mark.parametrize(
    ("body", "printed", "words", "code"),
    [
        (b"[pod/t-0] hello\n[pod/t-1] [jobrelay: pod t-1: Forbidden]\n[pod/t-2] bye\n",
         "[pod/t-0] hello\n[pod/t-2] bye\n", "may not get pods/log in namespace team-a",
         EXIT_FORBIDDEN),
        (b"[jobrelay: pod t-0: Forbidden]\n", "", "refused to read the log of pod t-0",
         EXIT_FORBIDDEN),
        (b"hello\n[jobrelay: pod t-0: InternalError]\n", "hello\n",
         "the log of pod t-0 could not be read: InternalError", EXIT_FAILED),
    ],
)  # fmt: skip
def test_a_workers_refusal_is_an_error_never_a_line_of_output(
    answer: Any, body: bytes, printed: str, words: str, code: int
) -> None:
    kubeconfig = answer(httpx2.Response(200, headers=_PLAIN, content=body))
    result = CliRunner().invoke(logs, ["--kubeconfig", kubeconfig, "t", "--all-pods"])
    assert result.exit_code == code
    assert result.stdout == printed
    assert words in result.stderr and "Traceback" not in result.stderr


def test_a_clean_answer_exits_0(answer: Any) -> None:
    kubeconfig = answer(httpx2.Response(200, headers=_PLAIN, content=b"a\n[b]\nc"))
    result = CliRunner().invoke(logs, ["--kubeconfig", kubeconfig, "t"])
    assert (result.exit_code, result.stdout, result.stderr) == (0, "a\n[b]\nc", "")
