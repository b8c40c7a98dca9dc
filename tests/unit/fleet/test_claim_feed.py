"""A worker's PersistentVolumeClaim feed (fleet/workers/claim_feed.py): what it keeps of a
claim, when a change is news for placement, and a credential that may not list claims."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest

from jobrelay.fleet.workers.claim_feed import ClaimFeed, slim_claim
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import Change, InformerEvent


def claim(namespace: str, name: str, phase: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": "7",
                     "uid": "u", "managedFields": [{"manager": "x"}]},
        "spec": {"volumeName": "pv-1", "resources": {"requests": {"storage": "1Gi"}}},
    }  # fmt: skip
    if phase is not None:
        obj["status"] = {"phase": phase, "capacity": {"storage": "1Gi"}}
    return obj


def event(namespace: str, name: str, phase: Any = None, *, gone: bool = False) -> InformerEvent:
    new = None if gone else slim_claim(claim(namespace, name, phase))
    return InformerEvent(Change.DELETED if gone else Change.UPDATED, f"{namespace}/{name}",
                         None, new)  # fmt: skip


def test_a_claim_is_kept_as_namespace_name_and_phase() -> None:
    assert slim_claim(claim("team-a", "data", "Bound")) == {
        "metadata": {"namespace": "team-a", "name": "data", "resourceVersion": "7"},
        "status": {"phase": "Bound"},
    }
    assert slim_claim(claim("team-a", "data"))["status"] == {"phase": ""}
    assert slim_claim({"metadata": {"name": "x"}, "status": "bad"})["status"] == {"phase": ""}
    assert slim_claim({"metadata": {"name": "x"}, "status": {"phase": 3}})["status"] == {
        "phase": ""
    }


def test_news_is_a_claim_that_comes_goes_or_changes_phase() -> None:
    feed = ClaimFeed("w")
    assert feed._apply(event("team-a", "data", "Pending"))
    assert not feed._apply(event("team-a", "data", "Pending"))  # a resync: nothing new
    assert feed._apply(event("team-a", "data", "Bound"))
    assert feed.phases == {"team-a": {"data": "Bound"}}
    assert feed._apply(event("team-a", "data", gone=True))
    assert feed.phases == {}
    assert not feed._apply(event("team-a", "never-seen", gone=True))


@dataclass
class StandInInformer:
    has_synced: bool
    last_error: Exception | None


@pytest.mark.parametrize(
    ("synced", "error", "unreadable"),
    [
        (True, None, None),
        (False, None, None),  # still listing: not known yet
        (False, ApiError(0, "Unreachable", "refused"), None),  # not answering: not known yet
        (False, ApiError(403, "Forbidden", 'cannot list "persistentvolumeclaims"'),
         "list persistentvolumeclaims: Forbidden"),
        # Listed once: the cache stands while a watch fails.
        (True, ApiError(403, "Forbidden", "no"), None),
    ],
)  # fmt: skip
def test_a_credential_that_may_not_list_claims_makes_them_unreadable(
    synced: bool, error: Exception | None, unreadable: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    feed = ClaimFeed("w")
    feed.informer = StandInInformer(synced, error)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING):
        view = feed.view()
        feed.view()
    assert view.unreadable == unreadable and view.synced == synced
    warned = [r for r in caplog.records if "PersistentVolumeClaims" in r.getMessage()]
    assert len(warned) == (1 if unreadable else 0)  # said once, not per decision
