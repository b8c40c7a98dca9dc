"""GenericKind: any CRD with spec.managedBy, mirrored as it stands."""

from __future__ import annotations

import copy

import pytest

from jobrelay.kinds.base import Finish
from jobrelay.kinds.generic import DEFAULT_FINISHED_CONDITIONS, GenericKind
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import MIRROR_LABEL, ORIGIN_LABEL, ORIGIN_UID_LABEL
from jobrelay.vocabulary.resource import Resource

REF = Resource("example.com", "v1beta1", "widgets", "Widget")
KIND = GenericKind(REF)
NOW = "2026-03-01T12:10:00Z"


def widget(*, spec: JsonObj | None = None, status: JsonObj | None = None) -> JsonObj:
    obj: JsonObj = {
        "apiVersion": "example.com/v1beta1",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "team-a",
            "uid": "uid-1",
            "resourceVersion": "3",
            "generation": 4,
            "finalizers": ["example.com/cleanup"],
            "ownerReferences": [{"kind": "Thing", "name": "t"}],
            "labels": {"app": "w"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        },
        "spec": {"managedBy": "jobrelay.dev/relay", "size": 3, "nested": {"a": [1, 2]}},
    }
    if spec is not None:
        obj["spec"].update(spec)
    if status is not None:
        obj["status"] = status
    return obj


def condition(kind: str, status: str = "True", **extra: str) -> JsonObj:
    return {"type": kind, "status": status, **extra}


def test_a_kind_needs_a_finishing_condition() -> None:
    assert KIND.finished_conditions == DEFAULT_FINISHED_CONDITIONS
    assert GenericKind(REF, ["Done"]).finished_conditions == ("Done",)
    with pytest.raises(ValueError, match=r"Widget\.v1beta1\.example\.com: at least one"):
        GenericKind(REF, [])


def test_ref_and_name() -> None:
    assert KIND.name == "Widget.v1beta1.example.com"
    assert repr(KIND) == "GenericKind(Widget.v1beta1.example.com)"
    core = GenericKind(Resource("", "v1", "pods", "Pod"))
    assert (core.name, core.ref.api_version) == ("Pod.v1", "v1")


def test_build_mirror_is_the_object_less_manager_only_parts() -> None:
    obj = widget(status={"phase": "Running"})
    before = copy.deepcopy(obj)
    mirror = KIND.build_mirror(obj, controller_name="jobrelay.dev/relay", origin="hq")
    assert (mirror["apiVersion"], mirror["kind"]) == ("example.com/v1beta1", "Widget")
    assert mirror["spec"] == {"size": 3, "nested": {"a": [1, 2]}}
    assert "status" not in mirror
    metadata = mirror["metadata"]
    assert set(metadata) == {"name", "namespace", "labels", "annotations"}
    assert metadata["labels"] == {
        "app": "w",
        MIRROR_LABEL: "jobrelay.dev.relay",
        ORIGIN_LABEL: "hq",
        ORIGIN_UID_LABEL: "uid-1",
    }
    assert "kubectl.kubernetes.io/last-applied-configuration" not in metadata["annotations"]
    mirror["spec"]["nested"]["a"].append(3)
    assert obj == before


def test_slim_mirror_keeps_suspend_when_the_kind_has_it() -> None:
    mirror = KIND.build_mirror(widget(), controller_name="c", origin="o")
    mirror["status"] = {"phase": "Running"}
    assert KIND.slim_mirror(mirror)["spec"] == {}
    assert KIND.slim_mirror(mirror)["status"] == {"phase": "Running"}
    mirror["spec"]["suspend"] = False
    assert KIND.slim_mirror(mirror)["spec"] == {"suspend": False}
    assert KIND.slim_mirror({"metadata": {}}) == {"metadata": {}, "spec": {}, "status": {}}


@pytest.mark.parametrize(
    ("mine", "theirs", "patch"),
    [
        ({}, {}, None),  # a kind without suspend: nothing to follow
        ({}, {"suspend": True}, None),
        ({"suspend": False}, {}, None),
        ({"suspend": True}, {"suspend": True}, None),
        ({"suspend": True}, {}, {"spec": {"suspend": True}}),
        ({"suspend": False}, {"suspend": True}, {"spec": {"suspend": False}}),
    ],
)
def test_spec_patch_follows_suspend_only(
    mine: JsonObj, theirs: JsonObj, patch: JsonObj | None
) -> None:
    mirror = {"metadata": {}, "spec": {"size": 1, **theirs}}
    assert KIND.spec_patch(widget(spec={"size": 9, **mine}), mirror) == patch


def test_the_status_is_copied_as_it_stands() -> None:
    theirs = {"phase": "Running", "progress": {"done": 3}}
    mirror = {"metadata": {}, "status": theirs}
    status = KIND.next_status(widget(), mirror, now=NOW)
    assert status == theirs
    assert status is not None and status is not theirs
    status["progress"]["done"] = 4
    assert theirs["progress"]["done"] == 3  # a copy, not the cached mirror's own
    assert KIND.next_status(widget(status={"phase": "Running"}), mirror, now=NOW) == theirs
    assert KIND.next_status(widget(status=copy.deepcopy(theirs)), mirror, now=NOW) is None


@pytest.mark.parametrize(
    "status", [{}, {"phase": "Running"}, {"active": 1, "ready": 1}, {"replicatedJobsStatus": []}]
)
def test_a_generic_kind_never_claims_its_pods_run(status: JsonObj) -> None:
    # Which field counts running pods is the kind's own: a generic kind cannot tell.
    assert KIND.shows_running(widget(status=status)) is False


def test_no_status_to_copy() -> None:
    assert KIND.next_status(widget(status={"phase": "Pending"}), None, now=NOW) is None
    assert KIND.next_status(widget(), {"metadata": {}}, now=NOW) is None
    assert KIND.next_status(widget(), {"metadata": {}, "status": {}}, now=NOW) is None
    finished = widget(status={"conditions": [condition("Failed")]})
    running = {"metadata": {}, "status": {"phase": "Running"}}
    assert KIND.next_status(finished, running, now=NOW) is None  # frozen once finished


@pytest.mark.parametrize(
    ("finished_conditions", "conditions", "finish"),
    [
        (DEFAULT_FINISHED_CONDITIONS, [], None),
        (DEFAULT_FINISHED_CONDITIONS, [condition("Ready")], None),
        (DEFAULT_FINISHED_CONDITIONS, [condition("Succeeded", "False")], None),
        (DEFAULT_FINISHED_CONDITIONS, [condition("Succeeded")], Finish(True, "Succeeded", "")),
        (
            DEFAULT_FINISHED_CONDITIONS,
            [condition("Complete", reason="AllDone", message="ok")],
            Finish(True, "AllDone", "ok"),
        ),
        (
            DEFAULT_FINISHED_CONDITIONS,
            [condition("Ready"), condition("Failed", reason="Crashed", message="exit 1")],
            Finish(False, "Crashed", "exit 1"),
        ),
        # Only the configured types finish a workload.
        (("Done",), [condition("Succeeded")], None),
        (("Done",), [condition("Done")], Finish(True, "Done", "")),
        (("Done", "Error"), [condition("Error")], Finish(False, "Error", "")),
    ],
)
def test_finish(
    finished_conditions: tuple[str, ...], conditions: list[JsonObj], finish: Finish | None
) -> None:
    kind = GenericKind(REF, finished_conditions)
    obj = widget(status={"conditions": conditions})
    assert kind.finish(obj) == finish
    assert kind.is_finished(obj) is (finish is not None)


def test_suspend_has_run_and_what_it_cannot_tell() -> None:
    assert KIND.is_suspended(widget(spec={"suspend": True}))
    assert not KIND.is_suspended(widget())
    assert not KIND.has_run(widget())
    assert KIND.has_run(widget(status={"phase": "Running"}))
    assert KIND.pod_sets(widget()) == []
    assert KIND.status_violations(widget(), widget(status={"anything": 1})) == []


def test_slim_local_drops_managed_fields() -> None:
    obj = widget()
    obj["metadata"]["managedFields"] = [{"manager": "x"}]
    assert "managedFields" not in KIND.slim_local(obj)["metadata"]
