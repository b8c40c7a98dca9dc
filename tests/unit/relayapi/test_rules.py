"""The aggregated API's decisions: routes, discovery, queries, what is asked, which pods."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.catalog import DEFAULT_KIND
from jobrelay.relayapi.route_rules import (
    API_PATH,
    BadRequest,
    LogQuery,
    Route,
    User,
    access_review,
    allowed,
    choose_pods,
    current_mirror,
    discovery,
    job_path,
    kubelet_params,
    log_params,
    match_route,
    parse_log_query,
    plural_of,
    pod_summary,
    scrub,
    status_body,
)

P = API_PATH


@pytest.mark.parametrize(
    ("path", "route"),
    [
        (f"{P}/namespaces/team-a/jobs/train/log", Route("log", "team-a", "jobs", "train")),
        (
            f"{P}/namespaces/team-a/jobs/train.v2/mirror",
            Route("mirror", "team-a", "jobs", "train.v2"),
        ),
        (f"{P}/namespaces/t/jobsets/js/log", Route("log", "t", "jobsets", "js")),
        (f"{P}/namespaces/t/rayjobs.x/r/mirror", Route("mirror", "t", "rayjobs.x", "r")),
        (f"{P}/namespaces/team-a/jobs/train/logs", None),
        (f"{P}/namespaces/team-a/jobs/train/log/extra", None),
        (f"{P}/namespaces/Team/jobs/train/log", None),  # not a DNS name
        (f"{P}/namespaces/../jobs/train/log", None),
        (f"{P}/namespaces/a/jobs//log", None),
        (f"{P}/namespaces/a/Jobs/x/log", None),
        ("/apis/api.jobrelay.dev/v1/namespaces/a/jobs/x/log", None),
        ("/v1/namespaces/team-a/jobs/train/logs", None),  # the old route is gone
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
        ({"limitBytes": "500"}, LogQuery(limit_bytes=500)),
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
        ({"limitBytes": "0"}, "limitBytes"),
        ({"kind": "JobSet"}, "unknown parameter"),
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
                         "sinceSeconds", "limitBytes"}  # fmt: skip
    assert not (query.follow and query.previous)


def test_kubelet_params_are_what_kubectl_sends() -> None:
    query = LogQuery(container="c", follow=True, timestamps=True, tail_lines=5, since_seconds=9)
    assert kubelet_params(query) == {
        "container": "c", "follow": "true", "timestamps": "true", "tailLines": "5",
        "sinceSeconds": "9",
    }  # fmt: skip
    assert kubelet_params(LogQuery()) == {}


def _obj(cluster: str = "worker-a", mirrors: str = "1:worker-a:m-a") -> dict[str, Any]:
    annotations = {"jobrelay.dev/cluster": cluster, "jobrelay.dev/placements": cluster}
    if mirrors:
        annotations["jobrelay.dev/mirrors"] = mirrors
    return {"metadata": {"name": "train", "namespace": "team-a", "uid": "obj-uid",
                         "annotations": annotations}}  # fmt: skip


def _ours(*, uid: str, origin_uid: str = "obj-uid", origin: str = "o1", run: int = 1
          ) -> dict[str, Any]:  # fmt: skip
    """A mirror as jobrelay's caches hold it (vocabulary/names.py's marks)."""
    from jobrelay.vocabulary.names import (
        MIRROR_LABEL,
        ORIGIN_LABEL,
        ORIGIN_UID_LABEL,
        RUN_ANNOTATION,
        controller_label_value,
    )  # fmt: skip

    return {
        "metadata": {
            "name": "train", "namespace": "team-a", "uid": uid,
            "labels": {MIRROR_LABEL: controller_label_value("jobrelay.dev/controller"),
                       ORIGIN_LABEL: origin, ORIGIN_UID_LABEL: origin_uid},
            "annotations": {RUN_ANNOTATION: str(run)},
        }
    }  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "cached", "expected"),
    [
        # The recorded one (run 1 on worker-a, UID m-a).
        (_obj(), [("worker-a", _ours(uid="m-a"))], ("worker-a", "m-a")),
        (_obj(), [("worker-z", None), ("worker-a", _ours(uid="m-a"))], ("worker-a", "m-a")),
        # A worker's later-run "mirror" of this object, not recorded: never, wherever.
        (_obj(), [("worker-a", _ours(uid="m-a")), ("worker-b", _ours(uid="m-b", run=2))],
         ("worker-a", "m-a")),
        (_obj(), [("worker-b", _ours(uid="m-b", run=7))], None),
        # The worker it is placed on shows another UID than the recorded one.
        (_obj(), [("worker-a", _ours(uid="m-forged"))], None),
        # Not recorded yet (placed before records, or just before a restart): the current
        # run's on the worker it is placed on, as the relay adopts it; nowhere else.
        (_obj(mirrors=""), [("worker-a", _ours(uid="m-a"))], ("worker-a", "m-a")),
        (_obj(mirrors=""), [("worker-b", _ours(uid="m-b"))], None),
        # A namesake's mirror (another object's UID), another origin's: never.
        (_obj(), [("worker-a", _ours(uid="m-a", origin_uid="other"))], None),
        (_obj(), [("worker-a", _ours(uid="m-a", origin="o2"))], None),
        (_obj(), [], None),
    ],
)  # fmt: skip
def test_current_mirror_is_the_one_the_relay_follows(
    obj: dict[str, Any],
    cached: list[tuple[str, dict[str, Any] | None]],
    expected: tuple[str, str] | None,
) -> None:
    found = current_mirror(obj, cached, controller_name="jobrelay.dev/controller", origin="o1")
    assert (found and (found[0], found[1]["metadata"]["uid"])) == expected


@given(
    run=st.integers(min_value=1, max_value=50),
    forged_run=st.integers(min_value=1, max_value=10_000),
    where=st.sampled_from(["worker-a", "worker-b", "worker-c"]),
    forged_uid=st.sampled_from(["m-a", "m-b", "forged"]),
)
def test_a_forged_mirror_on_another_worker_is_never_followed(
    run: int, forged_run: int, where: str, forged_uid: str
) -> None:
    """Whatever run a worker other than the recorded one claims, with whatever UID, the
    API reads the recorded mirror (or nothing), never the forged one."""
    history = ",".join(["worker-a"] * run)
    obj = _obj(mirrors=f"{run}:worker-a:m-a")
    obj["metadata"]["annotations"]["jobrelay.dev/placements"] = history
    cached = [("worker-a", _ours(uid="m-a", run=run))]
    if where != "worker-a":
        cached.append((where, _ours(uid=forged_uid, run=forged_run)))
    found = current_mirror(obj, cached, controller_name="jobrelay.dev/controller", origin="o1")
    assert found is not None and (found[0], found[1]["metadata"]["uid"]) == ("worker-a", "m-a")
    alone = current_mirror(obj, cached[1:], controller_name="jobrelay.dev/controller", origin="o1")
    assert alone is None


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
    chosen = choose_pods(PODS, index=index, all_pods=all_pods, index_of=DEFAULT_KIND.pod_index)
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


def test_log_params() -> None:
    options = {"limit_bytes": None, "container": "main", "index": 0, "all_pods": False,
               "previous": True, "tail": 5, "since": None, "timestamps": False,
               "follow": False}  # fmt: skip
    assert log_params(options) == {
        "container": "main",
        "index": "0",
        "previous": "true",
        "tailLines": "5",
    }


def test_job_path_is_what_match_route_reads() -> None:
    path = job_path("team-a", "jobsets", "train", "log")
    assert path == "/apis/api.jobrelay.dev/v1alpha1/namespaces/team-a/jobsets/train/log"
    assert match_route(path) == Route("log", "team-a", "jobsets", "train")


KINDS = [("jobs", "Job"), ("jobsets", "JobSet")]


def test_discovery_of_the_group_and_version() -> None:
    groups = discovery("/apis", KINDS)
    assert groups is not None and groups["kind"] == "APIGroupList"
    (group,) = groups["groups"]
    assert group["name"] == "api.jobrelay.dev"
    assert group["preferredVersion"] == {
        "groupVersion": "api.jobrelay.dev/v1alpha1", "version": "v1alpha1",
    }  # fmt: skip
    assert discovery("/apis/api.jobrelay.dev", KINDS) == {
        "kind": "APIGroup", "apiVersion": "v1", **group,
    }  # fmt: skip
    version = discovery(API_PATH, KINDS)
    assert version is not None and version["kind"] == "APIResourceList"
    assert version["groupVersion"] == "api.jobrelay.dev/v1alpha1"
    assert [r["name"] for r in version["resources"]] == [
        "jobs/log", "jobs/mirror", "jobsets/log", "jobsets/mirror", "pendingworkloads",
    ]  # fmt: skip
    assert all(r["namespaced"] for r in version["resources"])
    assert all(r["verbs"] == ["get"] for r in version["resources"][:-1])
    assert version["resources"][-1]["verbs"] == ["list"]
    assert discovery(f"{API_PATH}/namespaces", KINDS) is None
    assert discovery("/api", KINDS) is None


@pytest.mark.parametrize(
    ("kind", "plural"),
    [("Job", "jobs"), ("jobset", "jobsets"), ("jobsets", "jobsets"), ("Policy", "policies"),
     ("RayJob", "rayjobs")],
)  # fmt: skip
def test_plural_of_a_kind_from_discovery(kind: str, plural: str) -> None:
    version = discovery(API_PATH, [*KINDS, ("policies", "Policy")])
    assert version is not None
    assert plural_of(kind, version["resources"]) == plural
