"""The logs API's decisions: routes, queries, who the caller is, what is asked, which pods."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.relayapi.rules import (
    BadRequest,
    LogQuery,
    Route,
    StreamSlots,
    User,
    access_review,
    allowed,
    choose_pods,
    job_path,
    kubelet_params,
    log_params,
    match_route,
    parse_log_query,
    pod_selector,
    pod_summary,
    scrub,
    status_body,
    user_from_certificate,
    user_from_token_review,
)


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/v1/namespaces/team-a/jobs/train/logs", Route("logs", "team-a", "train")),
        ("/v1/namespaces/team-a/jobs/train.v2/mirror", Route("mirror", "team-a", "train.v2")),
        ("/v1/namespaces/team-a/jobs/train/log", None),
        ("/v1/namespaces/team-a/jobs/train/logs/extra", None),
        ("/v1/namespaces/Team/jobs/train/logs", None),  # not a DNS name
        ("/v1/namespaces/../jobs/train/logs", None),
        ("/v1/namespaces/a/jobs//logs", None),
        ("/healthz", None),
    ],
)
def test_routes(path: str, route: Route | None) -> None:
    assert match_route(path) == route


@pytest.mark.parametrize(
    ("params", "query"),
    [
        ({}, LogQuery()),
        ({"follow": "true", "tailLines": "10"}, LogQuery(follow=True, tail_lines=10)),
        ({"index": "3", "container": "main"}, LogQuery(index=3, container="main")),
        ({"allPods": "", "timestamps": "1"}, LogQuery(all_pods=True, timestamps=True)),
        ({"previous": "true", "sinceSeconds": "60"}, LogQuery(previous=True, since_seconds=60)),
        ({"kind": "JobSet"}, LogQuery(kind="JobSet")),
        ({"tailLines": "0"}, LogQuery(tail_lines=0)),
    ],
)
def test_log_queries(params: dict[str, str], query: LogQuery) -> None:
    assert parse_log_query(params) == query


@pytest.mark.parametrize(
    ("params", "complaint"),
    [
        ({"tailLines": "-1"}, "tailLines"),
        ({"tailLines": "ten"}, "tailLines"),
        ({"sinceSeconds": "0"}, "sinceSeconds"),
        ({"index": "x"}, "index"),
        ({"follow": "maybe"}, "follow"),
        ({"limitBytes": "5"}, "unknown parameter"),
        ({"index": "1", "allPods": "true"}, "exclude"),
        ({"previous": "true", "follow": "true"}, "exclude"),
    ],
)
def test_bad_log_queries(params: dict[str, str], complaint: str) -> None:
    with pytest.raises(BadRequest, match=complaint):
        parse_log_query(params)


@given(st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=6))
def test_any_query_parses_or_is_a_bad_request(params: dict[str, str]) -> None:
    try:
        query = parse_log_query(params)
    except BadRequest:
        return
    sent = kubelet_params(query)
    assert set(sent) <= {"container", "previous", "follow", "timestamps", "tailLines",
                         "sinceSeconds"}  # fmt: skip
    assert not (query.follow and query.previous)


def test_kubelet_params_are_what_kubectl_sends() -> None:
    query = LogQuery(container="c", follow=True, timestamps=True, tail_lines=5, since_seconds=9)
    assert kubelet_params(query) == {
        "container": "c", "follow": "true", "timestamps": "true", "tailLines": "5",
        "sinceSeconds": "9",
    }  # fmt: skip
    assert kubelet_params(LogQuery()) == {}


def test_pod_selectors() -> None:
    assert pod_selector("Job", "train") == "batch.kubernetes.io/job-name=train"
    assert pod_selector("JobSet", "js") == "jobset.sigs.k8s.io/jobset-name=js"


def _pod(name: str, created: str, index: int | None = None, **status: Any) -> dict[str, Any]:
    labels = {} if index is None else {"batch.kubernetes.io/job-completion-index": str(index)}
    return {
        "metadata": {"name": name, "creationTimestamp": created, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main"}]},
        "status": status,
    }


PODS = [
    _pod("a", "2026-01-01T00:00:02Z", 0),
    _pod("b", "2026-01-01T00:00:01Z", 1),
    _pod("c", "2026-01-01T00:00:03Z", 1),
]


@pytest.mark.parametrize(
    ("index", "all_pods", "names"),
    [
        (None, False, ["c"]),  # the newest
        (0, False, ["a"]),
        (1, False, ["c"]),  # the newest of that index (a retry)
        (2, False, []),
        (None, True, ["b", "a", "c"]),  # oldest first
    ],
)
def test_choose_pods(index: int | None, all_pods: bool, names: list[str]) -> None:
    chosen = choose_pods(PODS, index=index, all_pods=all_pods)
    assert [p["metadata"]["name"] for p in chosen] == names


def test_choose_no_pods() -> None:
    assert choose_pods([], index=None, all_pods=False) == []


def test_pod_summary_shows_no_addresses() -> None:
    pod = _pod(
        "p", "2026-01-01T00:00:00Z",
        phase="Running", podIP="10.0.0.7", hostIP="192.168.1.5",
        podIPs=[{"ip": "10.0.0.7"}],
        conditions=[{"type": "Ready", "status": "True", "lastProbeTime": None}],
        containerStatuses=[{"name": "main", "ready": True, "restartCount": 2,
                            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}],
    )  # fmt: skip
    summary = pod_summary(pod)
    assert summary == {
        "name": "p", "phase": "Running", "node": "node-1", "restarts": 2, "ready": "1/1",
        "lastState": {"main": {"terminated": {"exitCode": 1, "reason": "Error"}}},
        "conditions": [{"type": "Ready", "status": "True"}],
    }  # fmt: skip
    assert "10.0.0.7" not in json.dumps(summary) and "192.168" not in json.dumps(summary)


def test_certificate_users() -> None:
    peercert = {
        "subject": (
            (("organizationName", "team-a"),),
            (("organizationName", "devs"),),
            (("commonName", "alice"),),
        )
    }
    assert user_from_certificate(peercert) == User(
        "alice", ("team-a", "devs", "system:authenticated")
    )
    assert user_from_certificate(None) is None
    assert user_from_certificate({}) is None
    assert user_from_certificate({"subject": ((("organizationName", "x"),),)}) is None


@pytest.mark.parametrize(
    ("status", "user"),
    [
        ({"authenticated": True, "user": {"username": "bob", "groups": ["g"], "uid": "7",
                                           "extra": {"scopes": ["a"]}}},
         User("bob", ("g",), "7", {"scopes": ("a",)})),
        ({"authenticated": False, "error": "token expired"}, None),
        ({"authenticated": True, "user": {}}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_token_reviews(status: dict[str, Any], user: User | None) -> None:
    assert user_from_token_review({"status": status}) == user


def test_access_review_asks_as_the_user() -> None:
    review = access_review(
        User("bob", ("g",), "7", {"scopes": ("a",)}),
        namespace="team-a", resource="pods", subresource="log",
    )  # fmt: skip
    assert review["kind"] == "SubjectAccessReview"
    assert review["spec"] == {
        "user": "bob", "groups": ["g"], "uid": "7", "extra": {"scopes": ["a"]},
        "resourceAttributes": {"namespace": "team-a", "verb": "get", "group": "",
                               "resource": "pods", "subresource": "log"},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ({"allowed": True}, True),
        ({"allowed": False}, False),
        ({"allowed": True, "denied": True}, False),
        ({}, False),
    ],
)
def test_allowed(status: dict[str, Any], verdict: bool) -> None:
    assert allowed({"status": status}) is verdict


def test_status_body_is_a_kubernetes_status() -> None:
    body = json.loads(status_body(403, "no"))
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "no", "reason": "Forbidden", "code": 403}  # fmt: skip


@pytest.mark.parametrize(
    "message",
    [
        'Get "https://127.0.0.1:10250/containerLogs/ns/p/c": dial tcp 127.0.0.1:10250: refused',
        "proxy to 10.1.2.3 failed",
        "node [fe80::1]:10250 down",
    ],
)
def test_scrub_removes_addresses(message: str) -> None:
    scrubbed = scrub(message)
    assert "127.0.0.1" not in scrubbed and "10.1.2.3" not in scrubbed and "fe80" not in scrubbed


def test_scrub_keeps_plain_words() -> None:
    text = 'previous terminated container "main" in pod "p-0" not found'
    assert scrub(text) == text


def test_stream_slots() -> None:
    slots = StreamSlots(2)
    assert slots.acquire("alice") and slots.acquire("alice")
    assert not slots.acquire("alice")
    assert slots.acquire("bob")
    slots.release("alice")
    assert slots.open("alice") == 1
    assert slots.acquire("alice")
    for _ in range(2):
        slots.release("alice")
    assert slots.open("alice") == 0


def test_log_params() -> None:
    options = {"kind": None, "container": "main", "index": 0, "all_pods": False,
               "previous": True, "tail": 5, "since": None, "timestamps": False,
               "follow": False}  # fmt: skip
    assert log_params(options) == {
        "container": "main",
        "index": "0",
        "previous": "true",
        "tailLines": "5",
    }


def test_job_path_quotes() -> None:
    assert job_path("team-a", "train", "logs") == "/v1/namespaces/team-a/jobs/train/logs"
