"""jobrelay's own marks on a mirror are jobrelay's: none is copied from what a user wrote.

A tenant's ``jobrelay.dev/carried-over`` on a Job used to reach its first mirror
and be read back as work done (``completions: 10`` showed ``succeeded: 10`` before
anything ran). Every key under ``jobrelay.dev/`` but the documented user-facing
ones is dropped from the user's metadata before jobrelay writes its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.kinds.generic import GenericKind
from jobrelay.kinds.job.carry import mirror_carry
from jobrelay.kinds.job.mirror import build_mirror
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kinds.mirrors import carried_over, mirror_metadata, run_of
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    CLUSTER_SELECTOR_ANNOTATION,
    CLUSTERS_ANNOTATION,
    CONTROLLER_ANNOTATION,
    MIRROR_LABEL,
    ORIGIN_LABEL,
    ORIGIN_UID_LABEL,
    PLACEMENT_ANNOTATION,
    REDISPATCH_ANNOTATION,
    RUN_ANNOTATION,
    USER_FACING_KEYS,
    is_own_mark,
)
from jobrelay.vocabulary.resource import Resource

CONTROLLER = "jobrelay.dev/relay"
UID = "uid-management"
FORGED_CARRY = json.dumps({"succeeded": 10, "failed": 0, "elapsed": 3600})

# What a tenant might write on its own object to pass for jobrelay's record.
FORGED: dict[str, str] = {
    CARRIED_OVER_ANNOTATION: FORGED_CARRY,
    RUN_ANNOTATION: "7",
    CONTROLLER_ANNOTATION: "someone-else",
    ORIGIN_LABEL: "another-manager",
    ORIGIN_UID_LABEL: "uid-of-another-job",
    MIRROR_LABEL: "fake",
    "jobrelay.dev/cluster": "worker-9",
    "jobrelay.dev/placements": "worker-9,worker-9",
    "jobrelay.dev/mirrors": "1:worker-9:uid-fake",
    "jobrelay.dev/not-placed": "NotPlaced: made up",
    "jobrelay.dev/blocked": "worker-9: FailedCreate: made up",
    "jobrelay.dev/some-future-key": "x",
}
USER_FACING = {
    CLUSTERS_ANNOTATION: "worker-1,worker-2",
    CLUSTER_SELECTOR_ANNOTATION: "tier=onprem",
    PLACEMENT_ANNOTATION: "pack",
    REDISPATCH_ANNOTATION: "never",
}


def job(annotations: dict[str, str], labels: dict[str, str] | None = None) -> JsonObj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": UID,
            "labels": {"app": "train", **(labels or {})},
            "annotations": {"team": "vision", **annotations},
        },
        "spec": {
            "managedBy": CONTROLLER,
            "completions": 10,
            "parallelism": 2,
            "activeDeadlineSeconds": 7200,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def build_with(kind_name: str, obj: JsonObj) -> JsonObj:
    if kind_name == "job":
        return build_mirror(obj, controller_name=CONTROLLER, origin="hq")
    if kind_name == "jobset":
        return JobSetKind().build_mirror(obj, controller_name=CONTROLLER, origin="hq")
    generic = GenericKind(Resource("example.com", "v1", "widgets", "Widget"))
    return generic.build_mirror(obj, controller_name=CONTROLLER, origin="hq")


@pytest.mark.parametrize("kind_name", ["job", "jobset", "generic"])
def test_a_users_jobrelay_marks_never_reach_the_mirror(kind_name: str) -> None:
    obj = job({**FORGED, **USER_FACING}, labels=dict(FORGED))
    mirror = build_with(kind_name, obj)
    labels, annotations = mirror["metadata"]["labels"], mirror["metadata"]["annotations"]
    # jobrelay's own marks, written by jobrelay:
    assert labels[ORIGIN_LABEL] == "hq"
    assert labels[ORIGIN_UID_LABEL] == UID
    assert labels[MIRROR_LABEL] == "jobrelay.dev.relay"
    assert annotations[CONTROLLER_ANNOTATION] == CONTROLLER
    assert annotations[RUN_ANNOTATION] == "1"
    assert run_of(mirror) == 1
    # none of the user's:
    assert CARRIED_OVER_ANNOTATION not in annotations
    assert carried_over(mirror) == {}
    own_left = {k for k in {**labels, **annotations} if k.startswith("jobrelay.dev/")} - {
        ORIGIN_LABEL, ORIGIN_UID_LABEL, MIRROR_LABEL, CONTROLLER_ANNOTATION, RUN_ANNOTATION
    } - USER_FACING.keys()  # fmt: skip
    assert own_left == set()
    # the user-facing ones and the user's own keys pass:
    assert {k: annotations[k] for k in USER_FACING} == USER_FACING
    assert annotations["team"] == "vision"
    assert labels["app"] == "train"


def test_a_forged_carried_over_asks_for_every_completion() -> None:
    """The bug: completions 10 with a forged record of 10 succeeded made a mirror asking
    for none, and a status showing 10 succeeded before anything ran."""
    mirror = build_mirror(job({CARRIED_OVER_ANNOTATION: FORGED_CARRY}), controller_name=CONTROLLER,
                          origin="hq")  # fmt: skip
    assert not mirror_carry(mirror)
    assert mirror["spec"]["completions"] == 10
    assert mirror["spec"]["activeDeadlineSeconds"] == 7200


def test_jobrelays_own_carry_still_goes_on_the_mirror() -> None:
    metadata = mirror_metadata(
        job({CARRIED_OVER_ANNOTATION: FORGED_CARRY, RUN_ANNOTATION: "9"}),
        controller_name=CONTROLLER,
        origin="hq",
        run=2,
        carried_over={"succeeded": 3},
    )
    assert json.loads(metadata["annotations"][CARRIED_OVER_ANNOTATION]) == {"succeeded": 3}
    assert metadata["annotations"][RUN_ANNOTATION] == "2"


@pytest.mark.parametrize(
    ("key", "own"),
    [
        ("jobrelay.dev/carried-over", True),
        ("jobrelay.dev/run", True),
        ("jobrelay.dev/mirrors", True),
        ("jobrelay.dev/clusters", False),
        ("jobrelay.dev/cluster-selector", False),
        ("jobrelay.dev/placement", False),
        ("jobrelay.dev/redispatch", False),
        ("fleet.jobrelay.dev/duration", False),  # another prefix: the local fleet's pods
        ("example.com/jobrelay.dev/run", False),
        ("team", False),
    ],
)
def test_is_own_mark(key: str, own: bool) -> None:
    assert is_own_mark(key) is own


_SUFFIX = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz-._0123456789"), min_size=0,
                  max_size=30)  # fmt: skip
_KEYS = st.one_of(
    st.builds(lambda suffix: f"jobrelay.dev/{suffix}", _SUFFIX),
    st.sampled_from(sorted(USER_FACING_KEYS | FORGED.keys())),
    st.builds(lambda suffix: f"example.com/{suffix}", _SUFFIX),
)


@settings(max_examples=200, deadline=None)
@given(
    annotations=st.dictionaries(_KEYS, st.text(max_size=20), max_size=8),
    labels=st.dictionaries(_KEYS, st.text(max_size=20), max_size=8),
    kind_name=st.sampled_from(["job", "jobset", "generic"]),
)
def test_no_user_key_under_jobrelay_dev_reaches_a_mirror_but_the_user_facing_ones(
    annotations: dict[str, str], labels: dict[str, str], kind_name: str
) -> None:
    obj = job(annotations, labels)
    mirror = build_with(kind_name, obj)
    written: dict[str, Any] = {
        **mirror["metadata"]["labels"], **mirror["metadata"]["annotations"]
    }  # fmt: skip
    jobrelays = {ORIGIN_LABEL, ORIGIN_UID_LABEL, MIRROR_LABEL, CONTROLLER_ANNOTATION,
                 RUN_ANNOTATION}  # fmt: skip
    for key, value in {**labels, **annotations}.items():
        if key in jobrelays:
            continue
        if is_own_mark(key):
            assert key not in written
        else:
            assert written[key] in (value, labels.get(key), annotations.get(key))
    assert run_of(mirror) == 1
    assert carried_over(mirror) == {}
