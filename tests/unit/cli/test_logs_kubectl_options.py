"""`jobrelay logs` with kubectl's options: TYPE/NAME, [TYPE] -l SELECTOR, --all-containers,
--prefix; and which container logs the API reads for them, with which prefix."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.cli.logs import LogsTarget, logs, logs_target
from jobrelay.kube.client import ApiClient
from jobrelay.relayapi import user_client
from jobrelay.relayapi.log_source_rules import LogSource, container_names, log_sources
from jobrelay.relayapi.route_rules import BadRequest, LogQuery, parse_log_query


@pytest.mark.parametrize(
    ("text", "kind", "selector", "expected"),
    [
        ("t", None, None, LogsTarget(None, "t")),
        ("job/t", None, None, LogsTarget("job", "t")),
        ("rayjobs/t", "rayjobs", None, LogsTarget("rayjobs", "t")),
        (None, None, "app=x", LogsTarget(None, selector="app=x")),
        ("rayjob", None, "app=x", LogsTarget("rayjob", selector="app=x")),
        (None, "RayJob", "app=x", LogsTarget("RayJob", selector="app=x")),
    ],
)
def test_the_workloads_are_named_or_selected_as_kubectl_takes_them(
    text: str | None, kind: str | None, selector: str | None, expected: LogsTarget
) -> None:
    assert logs_target(text, kind, selector) == expected


@pytest.mark.parametrize(
    ("text", "kind", "selector"),
    [(None, None, None), ("job/t", None, "app=x"), ("jobs", "rayjob", "app=x"), ("a/", None, None)],
)
def test_a_name_and_a_selector_or_neither_is_refused(
    text: str | None, kind: str | None, selector: str | None
) -> None:
    with pytest.raises(ValueError):
        logs_target(text, kind, selector)


def pod(name: str, *containers: str, init: tuple[str, ...] = (), default: str = "") -> Any:
    annotations = {"kubectl.kubernetes.io/default-container": default} if default else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"initContainers": [{"name": c} for c in init],
                 "containers": [{"name": c} for c in containers]},
    }  # fmt: skip


TWO = [pod("p-0", "main", "side", init=("setup",)), pod("p-1", "main", default="main")]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (LogQuery(), [("p-0", "", b""), ("p-1", "", b"")]),
        (LogQuery(all_pods=True), [("p-0", "", b"[pod/p-0] "), ("p-1", "", b"[pod/p-1] ")]),
        (LogQuery(container="side", prefix=True),
         [("p-0", "side", b"[pod/p-0/side] "), ("p-1", "side", b"[pod/p-1/side] ")]),
        # The default container shown: the annotation's, else the first.
        (LogQuery(prefix=True), [("p-0", "", b"[pod/p-0/main] "), ("p-1", "", b"[pod/p-1/main] ")]),
        (LogQuery(all_containers=True), [("p-0", "setup", b""), ("p-0", "main", b""),
                                         ("p-0", "side", b""), ("p-1", "main", b"")]),
        (LogQuery(all_containers=True, prefix=True, all_pods=True),
         [("p-0", "setup", b"[pod/p-0/setup] "), ("p-0", "main", b"[pod/p-0/main] "),
          ("p-0", "side", b"[pod/p-0/side] "), ("p-1", "main", b"[pod/p-1/main] ")]),
    ],
)  # fmt: skip
def test_each_container_log_read_and_its_prefix(
    query: LogQuery, expected: list[tuple[str, str, bytes]]
) -> None:
    assert log_sources(TWO, query) == [LogSource(*one) for one in expected]


def test_container_names_skip_what_is_not_a_container() -> None:
    assert container_names({"spec": {"containers": [{"name": "a"}, "junk", {"name": ""}]}}) == ["a"]
    assert container_names({}) == []


def test_the_api_takes_the_new_parameters_and_refuses_a_contradiction() -> None:
    query = parse_log_query({"allContainers": "true", "prefix": "true"})
    assert query.all_containers and query.prefix
    with pytest.raises(BadRequest):
        parse_log_query({"allContainers": "true", "container": "main"})


# -- the command against a manager answering the list and each log -----------------------


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    seen: list[tuple[str, dict[str, str]]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        params = dict(request.url.params)
        seen.append((request.url.path, params))
        path = request.url.path
        if path == "/apis/api.jobrelay.dev/v1alpha1":
            resources = [
                {"name": "jobs/log", "kind": "Job"},
                {"name": "jobs/mirror", "kind": "Job"},
            ]
            return httpx2.Response(200, json={"kind": "APIResourceList", "resources": resources})
        if path == "/apis/batch/v1/namespaces/team-a/jobs":
            selected = params.get("labelSelector") == "app=x"
            names = ("b", "a") if selected else ()
            items = [{"metadata": {"name": n, "namespace": "team-a"}} for n in names]
            return httpx2.Response(200, json={"metadata": {"resourceVersion": "1"},
                                              "items": items})  # fmt: skip
        if path.endswith("/log"):
            name = path.split("/")[-2]
            return httpx2.Response(200, content=f"[pod/{name}-0/main] from {name}\n".encode())
        return httpx2.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})

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
    return str(path), seen


@pytest.mark.parametrize("follow", [[], ["-f"]])
def test_a_selector_reads_every_selected_workloads_log(manager: Any, follow: list[str]) -> None:
    kubeconfig, seen = manager
    result = CliRunner().invoke(
        logs, ["--kubeconfig", kubeconfig, "job", "-l", "app=x", "--all-containers", "--prefix",
               *follow],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(result.stdout.splitlines()) == ["[pod/a-0/main] from a", "[pod/b-0/main] from b"]
    logs_asked = [(path, params) for path, params in seen if path.endswith("/log")]
    assert [path.split("/")[-2] for path, _ in logs_asked] in (["a", "b"], ["b", "a"])
    for _, params in logs_asked:
        assert params["allContainers"] == "true" and params["prefix"] == "true"


def test_a_selector_that_matches_nothing_says_so(manager: Any) -> None:
    kubeconfig, _ = manager
    result = CliRunner().invoke(logs, ["--kubeconfig", kubeconfig, "-l", "app=none"])
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == "No resources found in team-a namespace.\n"


@pytest.mark.parametrize(
    "args",
    [["t", "-c", "main", "--all-containers"], ["job/t", "-l", "app=x"], []],
)
def test_contradictions_are_usage_errors(args: list[str]) -> None:
    result = CliRunner().invoke(logs, args)
    assert result.exit_code == 2


def test_the_log_answer_is_json_free(manager: Any) -> None:
    kubeconfig, seen = manager
    result = CliRunner().invoke(logs, ["--kubeconfig", kubeconfig, "job/t", "--prefix"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "[pod/t-0/main] from t\n"
    assert json.dumps(seen)  # what was asked is plain data


@given(st.lists(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
                max_size=4), st.booleans(), st.booleans())  # fmt: skip
def test_all_containers_reads_each_container_of_each_pod_once(
    containers: list[list[str]], prefix: bool, all_pods: bool
) -> None:
    pods = [pod(f"p-{i}", *names) for i, names in enumerate(containers)]
    query = LogQuery(all_containers=True, prefix=prefix, all_pods=all_pods)
    sources = log_sources(pods, query)
    assert [(s.pod, s.container) for s in sources] == [
        (f"p-{i}", name) for i, names in enumerate(containers) for name in names
    ]
    for source in sources:
        if prefix:
            assert source.prefix == f"[pod/{source.pod}/{source.container}] ".encode()
        else:
            assert source.prefix == (f"[pod/{source.pod}] ".encode() if all_pods else b"")
