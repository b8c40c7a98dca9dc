"""The worker pool's pure rules: a refusal's reason (refusals.py), the Connected verdict
and the lost timing (liveness_rules.py), when the status is written (status_rules.py)."""

from __future__ import annotations

import ssl
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.fleet.refusals import classify, refusal_for_tenants
from jobrelay.fleet.workerclusters import RegistryError
from jobrelay.fleet.workers.liveness_rules import (
    ConnectedVerdict,
    lost_in,
    silent_since,
    verdict,
)
from jobrelay.fleet.workers.status_rules import (
    HEARTBEAT_SECONDS,
    Written,
    needs_write,
    transition_time,
)
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, KubeconfigError, ResponseTooLarge

FORBIDDEN_LIST = (
    'jobs.batch is forbidden: User "jobrelay" cannot list resource "jobs" in API group '
    '"batch" at the cluster scope'
)


@pytest.mark.parametrize(
    ("error", "reason", "in_message"),
    [
        (ApiError(0, "Unreachable", "ConnectError: [Errno 111] Connection refused"),
         "Unreachable", "Connection refused"),
        (ApiError(0, "Unreachable", "ConnectError: [Errno -2] Name or service not known"),
         "Unreachable", "Name or service not known"),
        (ApiError(0, "Timeout", "ReadTimeout: timed out"), "Timeout", "timed out"),
        (ApiError(0, "Timeout", "ConnectTimeout: "), "Timeout", "no answer in time"),
        (ApiError(0, "Unreachable",
                  "ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
         "TLSError", "CERTIFICATE_VERIFY_FAILED"),
        (ApiError(0, "Unauthorized", "exec plugin failed"), "Unauthorized", "exec plugin"),
        (ApiError(401, "Unauthorized", "Unauthorized"), "Unauthorized", "401"),
        (ApiError(403, "Forbidden", FORBIDDEN_LIST), "Forbidden", "may not list on jobs.batch"),
        (ApiError(403, "Forbidden", 'forbidden: User "x" cannot list resource "namespaces" in '
                  'API group "" at the cluster scope'), "Forbidden", "may not list on namespaces "),
        (ApiError(403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path '
                  '"/version"'), "Forbidden", "may not get on path /version"),
        (ApiError(403, "Forbidden", "no"), "Forbidden", "lack a permission"),
        (ApiError(504, "Timeout", "gateway"), "Timeout", "504"),
        (ApiError(503, "ServiceUnavailable", "later"), "ApiError", "503 ServiceUnavailable"),
        (ResponseTooLarge(200, "the response", 64 * 1024 * 1024), "ResponseTooLarge",
         "longer than 64 MiB"),
        (KubeconfigError("invalid kubeconfig: no cluster"), "InvalidKubeconfig", "no cluster"),
        (RegistryError("Secret x/y is missing"), "InvalidKubeconfig", "missing"),
        (TimeoutError(), "Timeout", "no answer in time"),
        (ssl.SSLError("bad handshake"), "TLSError", "bad handshake"),
        (ConnectionRefusedError(111, "refused"), "Unreachable", "refused"),
        (RuntimeError("boom"), "ApiError", "RuntimeError: boom"),
    ],
)  # fmt: skip
def test_classify(error: BaseException, reason: str, in_message: str) -> None:
    got_reason, message = classify(error)
    assert got_reason == reason
    assert in_message in message


async def test_classify_real_client_errors() -> None:
    """The errors ApiClient really raises on a refused connection and on a timeout."""

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)

    def hang(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    def unauthorized(_request: httpx2.Request) -> httpx2.Response:
        body = {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}
        return httpx2.Response(401, content=msgspec.json.encode(body))

    for handler, reason in (
        (refuse, "Unreachable"),
        (hang, "Timeout"),
        (unauthorized, "Unauthorized"),
    ):
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler), base_url="https://w")
        async with ApiClient(http, cluster="w") as client:
            with pytest.raises(ApiError) as caught:
                await client.version(timeout=1.0)
        assert classify(caught.value)[0] == reason


async def test_version_reads_git_version() -> None:
    seen: list[str] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        return httpx2.Response(200, content=msgspec.json.encode({"gitVersion": "v1.35.4"}))

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer), base_url="https://w")
    async with ApiClient(http, cluster="w") as client:
        assert (await client.version(timeout=2.0))["gitVersion"] == "v1.35.4"
        assert client.request_counts == {"get": 1}
    assert seen == ["/version"]


def test_verdict_probe_failure_wins_over_synced_informers() -> None:
    got = verdict(ApiError(0, "Timeout", "ReadTimeout"), {"Job.v1.batch": (True, None)})
    assert (got.connected, got.reason) == (False, "Timeout")


def test_verdict_of_a_failed_probe_names_the_server() -> None:
    error = ApiError(401, "Unauthorized", "Unauthorized")
    got = verdict(error, {"Job.v1.batch": (False, None)}, "https://127.0.0.1:6443")
    assert got.message.startswith("https://127.0.0.1:6443: the apiserver refuses the credentials")


def test_verdict_connected_names_listed_and_missing_kinds() -> None:
    got = verdict(None, {"Job.v1.batch": (True, None), "JobSet": (False, None)})
    assert got.connected and got.reason == "Connected"
    assert "(Job.v1.batch)" in got.message and "JobSet" in got.message


def test_verdict_no_kind_listed_uses_the_informer_error() -> None:
    got = verdict(None, {"Job.v1.batch": (False, ApiError(403, "Forbidden", FORBIDDEN_LIST))})
    assert got == ConnectedVerdict(False, "Forbidden", got.message)
    assert got.message.startswith("cannot list Job.v1.batch: the credentials may not list on jobs")


def test_verdict_not_listed_yet_without_error() -> None:
    got = verdict(None, {"Job.v1.batch": (False, None)})
    assert (got.connected, got.reason) == (False, "NotListed")


def test_verdict_recovers_when_the_probe_answers_again() -> None:
    informers: dict[str, tuple[bool, BaseException | None]] = {"Job.v1.batch": (True, None)}
    down = verdict(ApiError(0, "Timeout", "t"), informers)
    up = verdict(None, informers)
    assert not down.connected and up == ConnectedVerdict(True, "Connected", up.message)


def condition(status: str, reason: str = "Connected") -> dict[str, Any]:
    return {"type": "Connected", "status": status, "reason": reason, "message": "m"}


def test_needs_write_first_time_and_on_change() -> None:
    assert needs_write(None, condition("True"), 0, None, 0.0)
    previous = Written(condition("True"), 0, "v1.35.4", at=100.0)
    assert not needs_write(previous, condition("True"), 0, "v1.35.4", 101.0)
    assert needs_write(previous, condition("False", "Timeout"), 0, "v1.35.4", 101.0)
    assert needs_write(previous, condition("True"), 1, "v1.35.4", 101.0)
    assert needs_write(previous, condition("True"), 0, "v1.36.0", 101.0)
    # An unknown version (no answer yet) is no change.
    assert not needs_write(previous, condition("True"), 0, None, 101.0)


def test_needs_write_heartbeat_only_when_connected() -> None:
    healthy = Written(condition("True"), 0, None, at=0.0)
    assert not needs_write(healthy, condition("True"), 0, None, HEARTBEAT_SECONDS - 1)
    assert needs_write(healthy, condition("True"), 0, None, HEARTBEAT_SECONDS)
    down = Written(condition("False", "Timeout"), 0, None, at=0.0)
    assert not needs_write(down, condition("False", "Timeout"), 0, None, 10 * HEARTBEAT_SECONDS)


def test_transition_time_kept_while_status_stays() -> None:
    existing = {**condition("True"), "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert transition_time(existing, "True", "NOW") == "2026-01-01T00:00:00Z"
    assert transition_time(existing, "False", "NOW") == "NOW"
    assert transition_time(None, "True", "NOW") == "NOW"


@pytest.mark.parametrize(
    ("down_since", "now", "expected"),
    [
        (None, 1000.0, None),
        (1000.0, 1000.0, 900.0),
        (1000.0, 1600.0, 300.0),
        (1000.0, 2000.0, -100.0),
    ],
)
def test_lost_in_counts_down_from_when_the_worker_went_silent(
    down_since: float | None, now: float, expected: float | None
) -> None:
    assert lost_in(down_since, now, 900.0) == expected


def test_the_stored_silence_is_when_the_condition_turned_false() -> None:
    condition = {
        "type": "Connected",
        "status": "False",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    assert silent_since({"status": {"conditions": [condition]}}) == 1767225600.0
    back = {**condition, "status": "True"}
    assert silent_since({"status": {"lostTime": "x", "conditions": [back]}}) is None
    assert silent_since({}) is None


# -- what a tenant may read of a worker's refusal -----------------------------------------

OTHER_TENANT = "team-b-secret-project"


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            ApiError(403, "Forbidden", f'jobs.batch "x" is forbidden: exceeded quota: {OTHER_TENANT}, '
                     "requested: count/jobs.batch=1, used: count/jobs.batch=5, limited: count/jobs.batch=5"),
            "HTTP 403 Forbidden: a ResourceQuota of the namespace there is used up",
        ),
        (
            ApiError(403, "Forbidden", f'jobs.batch is forbidden: User "system:serviceaccount:{OTHER_TENANT}:x" '
                     'cannot create resource "jobs" in API group "batch" in the namespace "a"'),
            "HTTP 403 Forbidden: jobrelay's credentials for that worker lack a permission",
        ),
        # A webhook or a policy may quote a tenant's "exceeded quota": it is no quota.
        (
            ApiError(403, "Forbidden", f'admission webhook "{OTHER_TENANT}.example.com" denied the '
                     "request: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"),
            "HTTP 403 Forbidden: an admission webhook there denied it",
        ),
        (
            ApiError(403, "Forbidden", f'jobs.batch "x" is forbidden: ValidatingAdmissionPolicy '
                     f"'{OTHER_TENANT}' with binding 'b' denied request: exceeded quota: q, "
                     "requested: pods=1, used: pods=1, limited: pods=1"),
            "HTTP 403 Forbidden: a policy there refuses it",
        ),
        (
            ApiError(400, "BadRequest", f'admission webhook "{OTHER_TENANT}.example.com" denied the request'),
            "HTTP 400 BadRequest: an admission webhook there denied it",
        ),
        (
            ApiError(
                422, "Invalid", f'Job.batch "x" is invalid: spec.foo: Unsupported value: "{OTHER_TENANT}"',
                {"causes": [{"field": "spec.foo", "reason": "FieldValueNotSupported", "message": OTHER_TENANT}]},
            ),
            "HTTP 422 Invalid: it finds the object invalid (fields: spec.foo;",
        ),
        (ApiError(403, "Forbidden", f"policy {OTHER_TENANT} says no"), "HTTP 403 Forbidden: a policy there refuses it"),
        (ApiError(500, "InternalError", OTHER_TENANT), "HTTP 500 InternalError"),
    ],
)  # fmt: skip
def test_a_refusal_reaches_tenants_as_its_kind_never_in_the_workers_words(
    error: ApiError, says: str
) -> None:
    summary = refusal_for_tenants(error)
    assert summary.startswith(says)
    assert OTHER_TENANT not in summary
