"""Workers from ClusterProfiles: the selected profiles, watched, and what jobrelay says of them.

With ``jobrelay run --cluster-profiles NAMESPACE`` every ClusterProfile there matching
``--cluster-profile-selector`` is a worker named after it (decisions: cluster_profile_rules.py).
The profile's status belongs to its cluster manager, which rewrites its conditions whole:
jobrelay never writes it. What jobrelay says of a profile worker is kept here instead, as a
WorkerCluster's status would say it (the fleet view of the aggregated API shows it), and told
on the ClusterProfile as Events: Warning ``ClusterProfileRefused`` (no provider of the file,
an unsafe cluster entry, a WorkerCluster of the same name), Normal ``ClusterProfileConnected``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from jobrelay.fleet import credentials
from jobrelay.fleet.cluster_profile_rules import (
    CLUSTER_PROFILE_REFUSED,
    ClusterProfileSettings,
    ProfileRefusal,
    control_plane_problem,
    profile_access,
    profile_identity,
    profile_kubeconfig,
)
from jobrelay.fleet.workerclusters import RegistryError
from jobrelay.kube.client import ApiClient
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.resources import CLUSTER_PROFILES
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions
from jobrelay.vocabulary.meta import Meta

__all__ = ["PROFILE_SPEC_KEY", "ClusterProfileSource", "ProfileRefused"]

_log = logging.getLogger(__name__)

# The spec key of a profile worker's registration, as the pool sees it (the pool's workers
# are registrations: WorkerCluster objects, or these).
PROFILE_SPEC_KEY = "clusterProfile"
CONNECTED_EVENT = "ClusterProfileConnected"


class ProfileRefused(RegistryError):
    """A profile jobrelay will not connect; the message says why."""

    reason = CLUSTER_PROFILE_REFUSED


class ClusterProfileSource:
    """The selected ClusterProfiles of one namespace, as worker registrations."""

    def __init__(
        self,
        manager: ApiClient,
        settings: ClusterProfileSettings,
        *,
        informer: InformerOptions,
        events: EventRecorder | None,
    ) -> None:
        self.settings = settings
        # The selector is the apiserver's: a profile relabelled out of it is deleted here.
        self.informer = Informer(
            manager, CLUSTER_PROFILES, namespace=settings.namespace,
            label_selector=settings.selector or None, options=informer,
        )  # fmt: skip
        self._events = events
        # What jobrelay says of each profile worker (a WorkerCluster's status, kept here).
        self._status: dict[str, dict[str, Any]] = {}
        # The (status, reason) of the Connected condition each profile was last told of.
        self._told: dict[str, tuple[str, str]] = {}
        # Profiles refused for a WorkerCluster of their name, told once a conflict.
        self._conflicts: set[str] = set()
        # Each profile's registration, with the profile and status it was built from.
        self._built: dict[str, tuple[Mapping[str, Any], Mapping[str, Any], dict[str, Any]]] = {}

    # -- reading ---------------------------------------------------------------------

    def profile(self, name: str) -> dict[str, Any] | None:
        return self.informer.get(f"{self.settings.namespace}/{name}")

    def names(self) -> list[str]:
        return [Meta(profile).name for profile in self.informer.values()]

    def registration(self, name: str) -> dict[str, Any] | None:
        """The profile as the pool's registration of a worker: its name and labels, a spec
        naming it, and the status jobrelay keeps of it."""
        profile = self.profile(name)
        if profile is None:
            return None
        status = self._status.get(name, {})
        built = self._built.get(name)
        # The pool reads every registration for each snapshot: the same objects, the same one.
        if built is not None and built[0] is profile and built[1] is status:
            return built[2]
        registration = self._registration(profile, name, status)
        self._built[name] = (profile, status, registration)
        return registration

    @staticmethod
    def _registration(
        profile: Mapping[str, Any], name: str, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        meta = Meta(profile)
        return {
            "apiVersion": CLUSTER_PROFILES.api_version,
            "kind": CLUSTER_PROFILES.kind,
            "metadata": {
                "name": name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "labels": dict(meta.labels),
            },
            "spec": {PROFILE_SPEC_KEY: {"namespace": meta.namespace, "name": name}},
            "status": status,
        }

    @staticmethod
    def owns(registration: Mapping[str, Any] | None) -> bool:
        return PROFILE_SPEC_KEY in ((registration or {}).get("spec") or {})

    def identity(self, name: str) -> tuple[str, ...]:
        profile = self.profile(name) or {}
        return profile_identity(profile_access(profile, self.settings.providers))

    def kubeconfig(self, name: str) -> dict[str, Any]:
        """The kubeconfig of the profile's worker; ProfileRefused says why there is none."""
        access = profile_access(self.profile(name) or {}, self.settings.providers)
        if isinstance(access, ProfileRefusal):
            raise ProfileRefused(f"ClusterProfile {self._where(name)}: {access.message}")
        try:
            return profile_kubeconfig(access)
        except credentials.KubeconfigRefused as refused:
            raise ProfileRefused(
                f"ClusterProfile {self._where(name)} access provider {access.provider!r}: "
                f"{refused.problem}"
            ) from None

    def health_problem(self, name: str) -> str | None:
        profile = self.profile(name)
        return control_plane_problem(profile) if profile is not None else None

    # -- what jobrelay says of it ----------------------------------------------------

    def record_status(self, name: str, patch: Mapping[str, Any], *, tell: bool = True) -> None:
        """Keep a status write of the pool (a merge patch, as a WorkerCluster's would be),
        and (``tell``: not a standby) tell the profile when its Connected condition turned."""
        self._status[name] = _merged(self._status.get(name, {}), patch)
        if not tell:
            return
        condition = next(iter(patch.get("conditions") or []), None)
        if not isinstance(condition, Mapping):
            return
        now = (str(condition.get("status")), str(condition.get("reason")))
        if self._told.get(name) == now:
            return
        self._told[name] = now
        message = str(condition.get("message") or "")
        if now[1] == CLUSTER_PROFILE_REFUSED:  # the pool logged it
            self._tell(name, "Warning", CLUSTER_PROFILE_REFUSED, message)
        elif now[0] == "True":
            self._tell(name, "Normal", CONNECTED_EVENT, f"connected as jobrelay worker {name}")

    def conflict(self, name: str, in_conflict: bool) -> None:
        """A WorkerCluster has (or no longer has) the profile's name: the profile is refused."""
        if not in_conflict:
            self._conflicts.discard(name)
            return
        if name in self._conflicts:
            return
        self._conflicts.add(name)
        message = (
            f"ClusterProfile {self._where(name)}: WorkerCluster {name} has the same name and "
            "stays the worker: this profile is not used (rename one, or deselect the profile)"
        )
        _log.warning("worker %s: %s", name, message)
        self._tell(name, "Warning", CLUSTER_PROFILE_REFUSED, message)

    def forget(self, event: InformerEvent) -> None:
        """A profile left the selection: what was said of it goes."""
        if event.new is None:
            name = Meta(event.obj).name
            for kept in (self._status, self._told, self._built):
                kept.pop(name, None)
            self._conflicts.discard(name)

    def _tell(self, name: str, kind: str, reason: str, message: str) -> None:
        profile = self.profile(name)
        if self._events is None or profile is None:
            return
        reference = {"apiVersion": CLUSTER_PROFILES.api_version, "kind": CLUSTER_PROFILES.kind,
                     "metadata": profile.get("metadata") or {}}  # fmt: skip
        self._events.record(
            reference, "Warning" if kind == "Warning" else "Normal", reason, message
        )

    def _where(self, name: str) -> str:
        return f"{self.settings.namespace}/{name}"


def _merged(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` with a JSON merge patch applied (RFC 7386: null removes)."""
    merged = dict(stored)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            old = merged.get(key)
            merged[key] = _merged(old if isinstance(old, Mapping) else {}, value)
        else:
            merged[key] = value
    return merged
