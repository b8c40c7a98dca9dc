"""Held by its dependencies: every ConfigMap, Secret and ServiceAccount its pods
require is on the manager, and may be copied, before its first placement and before
any mirror of it is created."""

from __future__ import annotations

from jobrelay.controller.relay.plan import Action, Annotate, RequeueAfter, Retry
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.facts import namespace
from jobrelay.controller.relay.steps.plan_parts import bounded, warning
from jobrelay.controller.relay.steps.step_types import Hold
from jobrelay.dependencies.copy_rules import refusal
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION
from jobrelay.vocabulary.placement import placement_of


class HeldByDependencies:
    """Held otherwise, unplaced, told once per reason (an Event, and the not-placed
    annotation while it has no placement); the appearance of the missing object brings
    it back (the runner's index of references). An optional one that is missing is
    fine: it is not copied."""

    name = "dependencies"

    def hold(self, s: Snapshot, obj: JsonObj) -> Hold | None:
        if not s.dependencies:
            return None
        if not s.dependencies_listed:
            return Hold((), Retry("the manager's ConfigMaps and Secrets have not listed"))
        found = _missing(s, obj) or _refused(s)
        if found is None:
            return None
        reason, message = found
        signature = f"{reason}|{message}"
        actions: list[Action] = []
        if signature != s.held:
            # The annotation first: the Event is written in the background, and whoever
            # sees it should find the object saying the same.
            if not placement_of(obj):
                actions.append(Annotate({NOT_PLACED_ANNOTATION: bounded(f"{reason}: {message}")}))
            actions.extend(warning(reason, message))
        return Hold(tuple(actions), RequeueAfter(s.settings.unplaceable_retry), held=signature)


def _missing(s: Snapshot, obj: JsonObj) -> tuple[str, str] | None:
    """The required ones the manager does not have, or does not read: the reason and
    message that say so."""
    assert s.dependencies is not None
    closed = [n.dependency for n in s.dependencies if n.closed and not n.dependency.optional]
    if closed:
        names = ", ".join(str(d) for d in closed)
        return (
            "MissingDependency",
            f"{names} cannot be copied: namespace {namespace(obj)} is not opened to Secret "
            f"copying, so jobrelay does not read its Secrets. An admin opens it (the chart's "
            "dependencies.secretNamespaces, or a Role and RoleBinding that let the controller "
            "get, list and watch Secrets there and --dependency-secret-namespaces; "
            f"docs/dependencies.md); this {s.kind.ref.kind} waits until then",
        )
    missing = [
        n.dependency for n in s.dependencies if n.source is None and not n.dependency.optional
    ]
    if not missing:
        return None
    names = ", ".join(str(d) for d in missing)
    verb = "does" if len(missing) == 1 else "do"
    return (
        "MissingDependency",
        f"{names} {verb} not exist in namespace {namespace(obj)}: this {s.kind.ref.kind} "
        "waits until it does, and is copied with it to the worker cluster that runs it",
    )


def _refused(s: Snapshot) -> tuple[str, str] | None:
    """The first one that may not be copied as it is: why, and what that means."""
    assert s.dependencies is not None
    for needed in s.dependencies:
        refused = None if needed.source is None else refusal(needed.dependency, needed.source)
        if refused is not None:
            return refused[0], (
                f"{needed.dependency} {refused[1]}: this {s.kind.ref.kind} waits until it changes"
            )
    return None
