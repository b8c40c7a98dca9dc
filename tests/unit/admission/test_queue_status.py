"""A RelayQueue's status as written: its figures formatted, its Valid condition."""

from __future__ import annotations

from tests.unit.admission.support import figures

from jobrelay.admission.queue_specs import InvalidQueue
from jobrelay.admission.queue_status import existing_condition, status_body, valid_condition

NOW = "2026-11-26T17:00:00Z"
LATER = "2026-11-26T17:05:00Z"


def test_the_status_body_formats_quantities_and_rounds_shares() -> None:
    body = status_body(figures(), valid_condition(None, None, NOW))
    assert body == {
        "conditions": [
            {
                "type": "Valid",
                "status": "True",
                "reason": "Valid",
                "message": "the controller admits this queue's workloads by fair share",
                "lastTransitionTime": NOW,
            }
        ],
        "pending": 3,
        "admitted": 10,
        "usage": {"cpu": "40", "memory": "3Gi"},
        "demand": {"cpu": "52500m"},
        "fairShare": 0.25,
        "actualShare": 0.3125,
    }


def test_an_invalid_queue_says_why_and_keeps_its_transition_time() -> None:
    invalid = InvalidQueue("q", "spec.weight 0 is not greater than 0")
    first = valid_condition(invalid, None, NOW)
    assert first["status"] == "False" and first["reason"] == "InvalidSpec"
    assert first["message"] == "ignored: spec.weight 0 is not greater than 0"
    assert valid_condition(invalid, first, LATER)["lastTransitionTime"] == NOW
    assert valid_condition(None, first, LATER)["lastTransitionTime"] == LATER


def test_the_stored_condition_is_found() -> None:
    condition = valid_condition(None, None, NOW)
    obj = {"status": {"conditions": [{"type": "Other", "status": "True"}, condition]}}
    assert existing_condition(obj) == condition
    assert existing_condition({"status": "broken"}) is None
