"""A worker's object may hold anything where labels and annotations belong: reading our
marks off it never raises."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from tests.unit.fuzz.hostile import anything, counted, fuzz, worker_maps

from jobrelay.kinds import mirrors
from jobrelay.vocabulary.names import CARRIED_OVER_ANNOTATION, RUN_ANNOTATION

CONTROLLER = "jobrelay.dev/relay"


@fuzz(500)
@given(worker_maps, worker_maps, anything, st.booleans())
@example({}, {CARRIED_OVER_ANNOTATION: "[" * 20_000}, None, False)
@example({}, {RUN_ANNOTATION: float("inf")}, None, False)
@counted
def test_reading_marks_off_any_worker_object_never_raises(
    labels: Any, annotations: Any, metadata: Any, whole_metadata: bool
) -> None:
    meta = metadata if whole_metadata else {"labels": labels, "annotations": annotations}
    obj: Any = {"metadata": meta}
    assert mirrors.run_of(obj) >= 1
    assert isinstance(mirrors.carried_over(obj), dict)
    origin = mirrors.origin_uid(obj)
    assert origin is None or isinstance(origin, str)
    assert isinstance(mirrors.is_ours(obj, CONTROLLER, "origin"), bool)
    assert isinstance(
        mirrors.is_mirror_of(obj, {"metadata": {"uid": "u"}}, CONTROLLER, "origin"), bool
    )
    assert isinstance(mirrors.slim_metadata(obj), dict)
