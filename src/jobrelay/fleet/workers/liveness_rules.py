"""Whether a worker is Connected, and when it is declared lost: pure rules, no I/O.

The pool probes each worker (``GET /version`` with a short timeout, every few
seconds) and looks at its mirror informers; :func:`verdict` turns both into
the ``Connected`` condition (the reason of a failure is named by
:func:`~jobrelay.fleet.refusals.classify`), with two reasons of its own:

============================  ===============================================
reason                        meaning
============================  ===============================================
``Connected``                 it answers, and at least one kind is listed
``NotListed``                 it answers but has not listed its mirrors yet
``ControlPlaneUnhealthy``     it answers, but its ClusterProfile says
                              ``ControlPlaneHealthy=False``
============================  ===============================================

A worker not connected for the lost timeout is declared lost (its workloads
move): :class:`LostClock` keeps since when, and :func:`lost_in` says how long
is left.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.fleet.cluster_profile_rules import CONTROL_PLANE_UNHEALTHY
from jobrelay.fleet.refusals import classify

__all__ = ["NOT_LISTED", "ConnectedVerdict", "LostClock", "lost_in", "silent_since", "verdict"]

# The reason of a worker that answers but whose mirror caches are still listing.
NOT_LISTED = "NotListed"


@dataclass(frozen=True)
class ConnectedVerdict:
    """The ``Connected`` condition a worker deserves now."""

    connected: bool
    reason: str
    message: str


def verdict(
    probe_error: BaseException | None,
    informers: Mapping[str, tuple[bool, BaseException | None]],
    server: str = "",
    reported_problem: str | None = None,
) -> ConnectedVerdict:
    """The condition from the last probe (None: it answered, or none ran yet) and, per
    kind, whether its mirror informer has listed and its last error; a failed probe's
    message starts with the ``server`` it went to. ``reported_problem``: what its own
    registration says is wrong (a ClusterProfile's ControlPlaneHealthy=False), which
    outweighs an answering probe."""
    if reported_problem is not None and probe_error is None:
        return ConnectedVerdict(False, CONTROL_PLANE_UNHEALTHY, reported_problem)
    if probe_error is not None:
        reason, message = classify(probe_error)
        return ConnectedVerdict(False, reason, f"{server}: {message}" if server else message)
    listed = [kind for kind, (synced, _) in informers.items() if synced]
    not_listed = [kind for kind, (synced, _) in informers.items() if not synced]
    if not listed:
        for kind, (_, error) in informers.items():
            if error is not None:
                reason, message = classify(error)
                return ConnectedVerdict(False, reason, f"cannot list {kind}: {message}")
        return ConnectedVerdict(False, NOT_LISTED, f"has not listed {', '.join(not_listed)} yet")
    message = f"mirrors listed and watched ({', '.join(listed)})"
    if not_listed:
        message += (
            f"; not listed (no CRD there, or no rights): {', '.join(not_listed)}, "
            "so no such workload is placed here"
        )
    return ConnectedVerdict(True, "Connected", message)


def lost_in(down_since: float | None, now: float, timeout: float) -> float | None:
    """Seconds until a worker down since ``down_since`` is declared lost (<= 0: it is);
    None for a worker that is up. Times are seconds since the epoch."""
    if down_since is None:
        return None
    return timeout - (now - down_since)


def silent_since(registration: Mapping[str, Any]) -> float | None:
    """When the stored Connected condition turned False (epoch seconds), if it is False."""
    status = registration.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") != "Connected" or condition.get("status") != "False":
            continue
        try:
            moment = datetime.datetime.fromisoformat(str(condition.get("lastTransitionTime")))
        except ValueError:
            return None
        return moment.timestamp()
    return None


@dataclass
class LostClock:
    """Since when one worker has not been connected, and whether it is declared lost.

    Only the probe and status path moves it (:meth:`observe`, :meth:`failed_at`,
    :meth:`back`, :meth:`follow`); reading how close a worker is to being lost
    (:meth:`lost_in`) changes nothing.
    """

    timeout: float
    # Since when (seconds since the epoch) it has not been connected; None: it is.
    down_since: float | None = None
    declared_lost: bool = False

    def lost_in(
        self, *, connected: bool, failing: bool, registration: Mapping[str, Any], now: float
    ) -> float | None:
        """None while connected; else seconds until it is declared lost (<= 0: it is).

        ``failing``: it is not connected and not merely still connecting (or listing),
        which is not timed: declaring a worker lost early could run a workload twice.
        """
        if connected:
            return None
        since = self.down_since
        if since is None:
            if not failing:
                return self.timeout
            since = _counted_from(registration, now)
        return lost_in(since, now, self.timeout)

    def observe(
        self, *, connected: bool, failing: bool, registration: Mapping[str, Any], now: float
    ) -> None:
        """Start (or stop) the clock on what is seen now."""
        if connected:
            self.down_since = None
        elif self.down_since is None and failing:
            self.down_since = _counted_from(registration, now)

    def failed_at(self, now: float) -> None:
        """Its probe saw it fail now: the lost timeout counts from here (or from earlier)."""
        if self.down_since is None:
            self.down_since = now

    def back(self) -> None:
        """Its probe saw it answer again."""
        self.down_since = None

    def follow(
        self, *, connected: bool, failing: bool, registration: Mapping[str, Any], now: float
    ) -> bool | None:
        """Observe, then declare it lost once its time is up (or no longer lost when it is
        back): True when it was just declared lost, False when it just came back, None when
        nothing changed."""
        self.observe(connected=connected, failing=failing, registration=registration, now=now)
        left = self.lost_in(
            connected=connected, failing=failing, registration=registration, now=now
        )
        lost = left is not None and left <= 0
        if lost == self.declared_lost:
            return None
        self.declared_lost = lost
        return lost

    def lost_time(self) -> float | None:
        """When it was declared lost (seconds since the epoch), if it is."""
        if not self.declared_lost or self.down_since is None:
            return None
        return self.down_since + self.timeout


def _counted_from(registration: Mapping[str, Any], now: float) -> float:
    # The time the stored condition turned False counts, so that a controller that
    # restarts or hands over often still declares it lost on time.
    return silent_since(registration) or now
