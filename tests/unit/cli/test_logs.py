"""`jobrelay logs`: its durations, query, and what it says (and exits with) when refused."""

from __future__ import annotations

import pytest

from jobrelay.cli.logs import (
    EXIT_FAILED,
    EXIT_FORBIDDEN,
    EXIT_NOT_FOUND,
    EXIT_UNAUTHORIZED,
    explain,
    parse_duration,
    workload_named,
)
from jobrelay.relayapi.route_rules import RelayError


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30), ("30s", 30), ("5m", 300), ("1h30m", 5400), ("2h", 7200)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "5x", "m", "1d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("error", "words", "code"),
    [
        (RelayError(401, "Unauthorized", "the bearer token is not valid"), "credentials were not accepted",
         EXIT_UNAUTHORIZED),
        (RelayError(403, "Forbidden", 'user "bob" cannot get pods/log'), "pods/log",
         EXIT_FORBIDDEN),
        (RelayError(404, "NotPlaced", 'Job "t" is not placed on a worker yet'), "waits",
         EXIT_NOT_FOUND),
        (RelayError(404, "NoPods", 'no pods of "t"'), "not created yet", EXIT_NOT_FOUND),
        (RelayError(404, "PodsRemoved", "Job team-a/t finished at 2026-03-01T12:05:00Z; its pods "
                    "were removed at 2026-03-01T13:05:00Z (--finished-mirror-ttl 1h; set it "
                    "longer to keep logs longer)"), "removed at 2026-03-01T13:05:00Z", EXIT_FAILED),
        (RelayError(0, "Unreachable", "cannot connect to https://m:6443 (refused)"),
         "cannot connect", EXIT_FAILED),
        (RelayError(503, "APIUnavailable", "the jobrelay API is not available (x): check "
                    "`kubectl get apiservice v1alpha1.api.jobrelay.dev`"),
         "kubectl get apiservice v1alpha1.api.jobrelay.dev", EXIT_FAILED),
        (RelayError(503, "WorkerUnavailable", "worker down"), "worker down", EXIT_FAILED),
    ],
)  # fmt: skip
def test_refusals_are_explained(error: RelayError, words: str, code: int) -> None:
    message, exit_code = explain(error, "team-a", "t")
    assert words in message and exit_code == code
    if error.reason == "PodsRemoved":  # finished: it waits for nothing
        assert "waits for a worker" not in message and message == error.message


@pytest.mark.parametrize(
    ("text", "kind", "named"),
    [
        ("train", None, (None, "train")),
        ("train", "RayJob", ("RayJob", "train")),
        ("rayjob/train", None, ("rayjob", "train")),
        ("pytorchjobs/train", None, ("pytorchjobs", "train")),
        ("RayJob/train", "rayjob", ("RayJob", "train")),
    ],
)
def test_a_workload_is_named_as_kubectl_names_one(
    text: str, kind: str | None, named: tuple[str | None, str]
) -> None:
    assert workload_named(text, kind) == named


@pytest.mark.parametrize(
    ("text", "kind"), [("/train", None), ("rayjob/", None), ("a/b/c", None), ("rayjob/t", "Job")]
)
def test_a_workload_named_wrong_is_refused(text: str, kind: str | None) -> None:
    with pytest.raises(ValueError):
        workload_named(text, kind)
