"""What a copy of a workload's ConfigMap, Secret or ServiceAccount carries, and what is
never copied: tables, plus properties over any source object."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.dependencies.copy_rules import (
    MAX_CONTENT_BYTES,
    CopyUser,
    Source,
    content_of,
    copy_body,
    copy_of,
    digest,
    in_use,
    is_our_copy,
    refusal,
    settled_unused,
    slim_copy,
    slim_source,
    source_of,
)
from jobrelay.dependencies.template_references import Dependency
from jobrelay.vocabulary.names import (
    COPY_LABEL,
    DIGEST_ANNOTATION,
    ORIGIN_LABEL,
    SOURCE_UID_ANNOTATION,
)

CONTROLLER = "jobrelay.dev/relay"
META = {
    "name": "settings",
    "namespace": "team-a",
    "uid": "src-1",
    "resourceVersion": "7",
    "labels": {"team": "a"},
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p-1"}],
    "managedFields": [{"manager": "kubectl"}],
}
OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "m-1",
         "blockOwnerDeletion": False}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "source", "copied"),
    [
        (
            "configmap",
            {"data": {"a": "1"}, "binaryData": {"b": "AA=="}, "immutable": True},
            {"data": {"a": "1"}, "binaryData": {"b": "AA=="}},
        ),
        ("configmap", {}, {}),
        (
            "secret",
            {
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": "e30="},
                "stringData": {"x": "y"},
            },
            {"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}},
        ),
        (
            "serviceaccount",
            {
                "automountServiceAccountToken": False,
                "secrets": [{"name": "tok"}],
                "imagePullSecrets": [{"name": "regcred"}],
            },
            {"automountServiceAccountToken": False},
        ),
        ("serviceaccount", {"secrets": [{"name": "tok"}]}, {}),
    ],
)
def test_what_a_copy_carries(kind: Any, source: dict[str, Any], copied: dict[str, Any]) -> None:
    assert content_of(kind, {"metadata": META, **source}) == copied


def test_a_copy_body_has_the_content_and_our_marks_only_no_owners() -> None:
    source = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": META, "data": {"a": "1"}}
    body = copy_body(
        Dependency("configmap", "settings"), source, controller_name=CONTROLLER,
        origin="manager",
    )  # fmt: skip
    assert body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "team-a",
            "labels": {COPY_LABEL: "jobrelay.dev.relay", ORIGIN_LABEL: "manager"},
            "annotations": {
                SOURCE_UID_ANNOTATION: "src-1",
                DIGEST_ANNOTATION: digest({"data": {"a": "1"}}),
            },
        },
        "data": {"a": "1"},
    }
    assert is_our_copy(body, CONTROLLER, "manager")
    assert not is_our_copy(body, CONTROLLER, "other-manager")
    assert not is_our_copy(source, CONTROLLER, "manager")


def test_the_digest_follows_the_content_not_its_order() -> None:
    assert digest({"data": {"a": "1", "b": "2"}}) == digest({"data": {"b": "2", "a": "1"}})
    assert digest({"data": {"a": "1"}}) != digest({"data": {"a": "2"}})
    assert digest({"type": "Opaque", "data": {}}) != digest({"type": "other", "data": {}})


def test_the_managers_cache_keeps_a_digest_never_the_data() -> None:
    secret = {"metadata": META, "type": "Opaque", "data": {"password": "aHVudGVyMg=="}}
    slim = slim_source("secret")(secret)
    assert "aHVudGVyMg==" not in repr(slim)
    assert slim["metadata"] == {k: META[k] for k in ("name", "namespace", "uid", "resourceVersion")}
    source = source_of(slim)
    assert source == Source("src-1", digest(content_of("secret", secret)), 7 + 8, "Opaque")


@pytest.mark.parametrize(
    ("dependency", "source", "reason"),
    [
        (
            Dependency("secret", "tok"),
            Source("u", "d", 10, "kubernetes.io/service-account-token"),
            "DependencyRefused",
        ),
        (
            Dependency("secret", "big"),
            Source("u", "d", MAX_CONTENT_BYTES + 1, "Opaque"),
            "DependencyTooLarge",
        ),
        (
            Dependency("configmap", "big"),
            Source("u", "d", MAX_CONTENT_BYTES + 1),
            "DependencyTooLarge",
        ),
        (Dependency("secret", "ok"), Source("u", "d", MAX_CONTENT_BYTES, "Opaque"), None),
        (Dependency("configmap", "tok"), Source("u", "d", 1, ""), None),
    ],
)
def test_what_is_never_copied(dependency: Dependency, source: Source, reason: str | None) -> None:
    refused = refusal(dependency, source)
    assert (refused[0] if refused else None) == reason


def test_sizes_count_decoded_bytes_of_base64_values() -> None:
    text = slim_source("configmap")({"metadata": META, "data": {"k": "x" * 100}})
    binary = slim_source("configmap")({"metadata": META, "binaryData": {"k": "A" * 100}})
    assert (text["size"], binary["size"]) == (101, 76)


def test_a_workers_copy_is_cached_by_its_marks_owners_and_digest() -> None:
    body = copy_body(
        Dependency("configmap", "settings"),
        {"metadata": META, "data": {"secret": "value"}},
        controller_name=CONTROLLER, origin="manager",
    )  # fmt: skip
    # A copy made before issue 33 has owners: the cache keeps them.
    body["metadata"].update(
        uid="c-1", resourceVersion="3", creationTimestamp="2026-01-01T00:00:00Z",
        ownerReferences=[OWNER],
    )  # fmt: skip
    slim = slim_copy(body)
    assert "value" not in repr(slim)
    copy = copy_of(slim)
    assert copy is not None
    assert (copy.uid, copy.owners) == ("c-1", frozenset({"m-1"}))
    assert copy.digest == digest({"data": {"secret": "value"}})


# -- properties ---------------------------------------------------------------------------

_text = st.text(max_size=8)
_values = st.dictionaries(_text, _text, max_size=4)
_any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_sources = st.fixed_dictionaries(
    {"metadata": st.just(META)},
    optional={
        "data": _values,
        "binaryData": _values,
        "type": _text,
        "automountServiceAccountToken": st.booleans(),
        "secrets": _any_json,
        "imagePullSecrets": _any_json,
        "stringData": _values,
        "immutable": st.booleans(),
        "spec": _any_json,
    },
)
_kinds = st.sampled_from(["configmap", "secret", "serviceaccount"])


@given(kind=_kinds, source=_sources)
def test_a_copy_never_carries_anything_its_source_does_not(kind: Any, source: Any) -> None:
    body = copy_body(
        Dependency(kind, "settings"), source, controller_name=CONTROLLER, origin="manager"
    )
    ours = {"apiVersion", "kind", "metadata"}
    for field, value in body.items():
        if field not in ours:
            assert source.get(field) == value, field
    # Nothing of the source's metadata but its name, namespace and UID (in our mark).
    metadata = body["metadata"]
    assert set(metadata) <= {"name", "namespace", "labels", "annotations"}
    assert set(metadata["labels"]) == {COPY_LABEL, ORIGIN_LABEL}
    assert set(metadata["annotations"]) == {SOURCE_UID_ANNOTATION, DIGEST_ANNOTATION}
    # A ServiceAccount's permissions (its Secrets, pull Secrets) never follow.
    if kind == "serviceaccount":
        assert set(body) <= ours | {"automountServiceAccountToken"}


@given(kind=_kinds, source=_sources)
def test_the_caches_digest_is_the_copys(kind: Any, source: Any) -> None:
    """The manager's cache and the copy agree on the digest: an unchanged source is never
    copied again, a changed one always is."""
    body = copy_body(
        Dependency(kind, "settings"), source, controller_name=CONTROLLER, origin="manager"
    )
    assert slim_source(kind)(source)["digest"] == body["metadata"]["annotations"][DIGEST_ANNOTATION]


# -- how long a copy lives ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("users", "used"),
    [
        ([], False),  # no workload names it any more
        ([CopyUser(mirrored_here=True, placed_here=True)], True),
        # Its mirror there, even finished or moved away: until the mirror goes.
        ([CopyUser(mirrored_here=True, placed_here=False, finished=True)], True),
        # Placed there, its mirror on its way.
        ([CopyUser(mirrored_here=False, placed_here=True)], True),
        # Placed there and finished: its mirror went.
        ([CopyUser(mirrored_here=False, placed_here=True, finished=True)], False),
        # Placed elsewhere, no mirror here.
        ([CopyUser(mirrored_here=False, placed_here=False)], False),
        ([CopyUser(False, False), CopyUser(False, True)], True),
    ],
)
def test_a_copy_is_in_use_while_a_workload_on_its_worker_needs_it(
    users: list[CopyUser], used: bool
) -> None:
    assert in_use(users) is used


def test_an_unused_copy_goes_only_after_it_stayed_unused() -> None:
    due, since = settled_unused(["a", "b"], {}, now=100.0, settle=10.0)
    assert (due, since) == ([], {"a": 100.0, "b": 100.0})  # never on one look
    due, since = settled_unused(["a"], since, now=105.0, settle=10.0)
    assert (due, since) == ([], {"a": 100.0})  # "b" used again: forgotten
    due, since = settled_unused(["a", "b"], since, now=110.0, settle=10.0)
    assert (due, since) == (["a"], {"a": 100.0, "b": 110.0})  # "b" starts over


@given(
    looks=st.lists(
        st.tuples(st.sets(st.sampled_from("abcd")), st.floats(0, 30)), min_size=1, max_size=8
    ),
    settle=st.floats(1, 20),
)
def test_a_copy_is_due_only_when_found_unused_on_every_look_for_settle_seconds(
    looks: list[tuple[set[str], float]], settle: float
) -> None:
    since: dict[str, float] = {}
    now = 0.0
    history: list[tuple[float, set[str]]] = []
    for unused, step in looks:
        now += step
        history.append((now, unused))
        due, since = settled_unused(sorted(unused), since, now, settle)
        assert set(since) == unused
        for copy in due:
            # Unused on every look back to one at least ``settle`` seconds ago.
            unbroken = []
            for t, found in reversed(history):
                if copy not in found:
                    break
                unbroken.append(t)
            assert now - min(unbroken) >= settle
