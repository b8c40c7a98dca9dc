"""The panel's routes: the fleet, queues and workloads views, a workload's Events from
both sides, and the dashboard's files.

Who may see what is asked of the manager (SubjectAccessReviews, remembered briefly):
the fleet needs ``get workerclusters``, the queues ``get relayqueues``; workloads are
shown in the namespaces (per kind) where the user may ``list`` them, and a user who
may list them nowhere (no kind everywhere, none in any namespace that has workloads)
gets 403, not an empty list or watch; a workload's Events need ``get`` on it.
Watches are bounded in all and per user (``PanelFeed.watch``: 429 beyond). The dashboard's files need nothing beyond the front
proxy: the manager's apiserver already authorised ``get dashboard``.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import EVENTS, RELAY_QUEUES, WORKER_CLUSTERS
from jobrelay.relayapi import panel_rules, route_rules
from jobrelay.relayapi.httpserver import Answer, Stream
from jobrelay.relayapi.panel import WATCH_LIFETIME, Access, PanelFeed, TooManyWatches, scope_of
from jobrelay.relayapi.panel_rules import FLEET, QUEUES, PanelRoute
from jobrelay.vocabulary.meta import Meta

__all__ = ["PanelRoutes", "Refusal"]

_log = logging.getLogger(__name__)

# Events shown of one side of a workload at most (the newest), and pods asked about.
MAX_EVENTS = 300
MAX_PODS_ASKED = 20


class Refusal(Exception):
    """A panel request turned down (its code, message and reason)."""

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


# May ``user`` do this (SubjectAccessReview attributes)?
Review = Callable[..., Awaitable[bool]]
# The placed mirror of a workload: (worker name, worker client, mirror, pods), or a refusal.
FindPlaced = Callable[
    [str, str, str], Awaitable[tuple[str, ApiClient, dict[str, Any], list[Mapping[str, Any]]]]
]
# The cached management object of (plural, namespace, name), None if not managed.
FindObject = Callable[[str, str, str], dict[str, Any] | None]


class PanelRoutes:
    def __init__(
        self,
        feed: PanelFeed,
        manager: ApiClient,
        review: Review,
        plurals: Callable[[], Mapping[str, str]],
        find_object: FindObject,
        find_placed: FindPlaced,
        *,
        known: Callable[..., bool | None] = lambda _user, **_attributes: None,
    ) -> None:
        self._feed = feed
        self._known = known  # the fresh answer of the one review cache, if any
        self._manager = manager
        self._review = review
        self._plurals = plurals  # plural -> API group, of every dispatched kind
        self._find_object = find_object
        self._find_placed = find_placed
        self._files: dict[str, bytes] = {}

    async def serve(
        self, user: route_rules.User, route: PanelRoute, params: Mapping[str, str]
    ) -> Answer | Stream:
        if route.what == panel_rules.DASHBOARD:
            return self._dashboard(route.name)
        if route.what == panel_rules.EVENTS:
            return await self._events(user, route)
        watch = params.get("watch", "").lower() in ("true", "1")
        access: Access | None = None
        if route.what == FLEET:
            await self._require(user, "workerclusters", group=WORKER_CLUSTERS.group,
                                resource=WORKER_CLUSTERS.plural)  # fmt: skip
        elif route.what == QUEUES:
            await self._require(user, "relayqueues", group=RELAY_QUEUES.group,
                                resource=RELAY_QUEUES.plural)  # fmt: skip
        else:
            access = await self._workload_access(user, route.namespace)
        if watch:
            lifetime = _lifetime(params.get("timeoutSeconds"))
            try:
                chunks = self._feed.watch(route.what, access, lifetime, user=user.name)
            except TooManyWatches as error:
                if access is not None:
                    access.close()
                raise Refusal(429, str(error), "TooManyRequests") from None
            return Stream(chunks, done=chunks.end, content_type="application/json")
        rows = self._feed.rows(route.what)
        if access is not None:
            await access.settle({scope_of(row_id) for row_id in rows})
            shown = [row for row_id, row in rows.items() if access.visible(scope_of(row_id))]
            access.close()
        else:
            shown = list(rows.values())
        return Answer(200, json.dumps(panel_rules.list_body(route.what, shown)).encode())

    # -- who may see what ----------------------------------------------------------

    async def _require(self, user: route_rules.User, what: str, **attributes: str) -> None:
        if not await self._review(user, namespace="", **attributes):
            raise Refusal(
                403,
                f'user "{user.name}" cannot get {what} on the management cluster '
                f"(the {'fleet' if what == 'workerclusters' else 'queues'} view needs it)",
                "Forbidden",
            )

    async def _workload_access(self, user: route_rules.User, namespace: str) -> Access:
        plurals = self._plurals()

        async def may_list(plural: str, in_namespace: str) -> bool:
            group = plurals.get(plural, "")
            return bool(
                await self._review(
                    user, verb="list", group=group, resource=plural, namespace=in_namespace
                )
            )

        def known(plural: str, in_namespace: str) -> bool | None:
            group = plurals.get(plural, "")
            return self._known(
                user, verb="list", group=group, resource=plural, namespace=in_namespace
            )

        if namespace:
            allowed = [p for p in plurals if await may_list(p, namespace)]
            if not allowed:
                raise Refusal(
                    403,
                    f'user "{user.name}" cannot list {", ".join(sorted(plurals))} in '
                    f'namespace "{namespace}" on the management cluster',
                    "Forbidden",
                )
            return Access(allowed, may_list, known, only_namespace=namespace)
        everywhere = [p for p in plurals if await may_list(p, "")]
        access = Access(everywhere, may_list, known)
        if everywhere:
            return access
        # Only where it may: a user who may list no kind in any namespace that has
        # workloads is told so (an empty answer would hold a watch for nothing).
        found = await access.any_visible(self._feed.scopes())
        if found:
            return access
        access.close()
        if found is None:
            raise Refusal(503, "cannot check permissions now; try again", "ServiceUnavailable")
        raise Refusal(
            403,
            f'user "{user.name}" cannot list {", ".join(sorted(plurals))} in any namespace '
            "that has workloads on the management cluster (ask for one namespace's: "
            ".../namespaces/NS/workloads)",
            "Forbidden",
        )

    # -- a workload's Events -----------------------------------------------------------

    async def _events(self, user: route_rules.User, route: PanelRoute) -> Answer:
        plurals = self._plurals()
        if route.plural not in plurals:
            raise Refusal(404, f"{route.plural!r} is not a kind this controller dispatches",
                          "NotFound")  # fmt: skip
        if not await self._review(
            user, group=plurals[route.plural], resource=route.plural,
            namespace=route.namespace, name=route.name,
        ):  # fmt: skip
            raise Refusal(
                403,
                f'user "{user.name}" cannot get {route.plural} in namespace '
                f'"{route.namespace}" on the management cluster',
                "Forbidden",
            )
        obj = self._find_object(route.plural, route.namespace, route.name)
        if obj is None:
            raise Refusal(404, f'"{route.name}" managed by jobrelay not found', "NotFound")
        rows = [
            panel_rules.event_row("manager", event)
            for event in await self._listed(
                self._manager, route.namespace, [Meta(obj).uid], "the management cluster"
            )
        ]
        try:
            worker, client, mirror, pods = await self._find_placed(
                route.plural, route.namespace, route.name
            )
        except Refusal:
            worker = ""  # not placed, or its worker is away: the manager's side alone
        if worker:
            newest = sorted(pods, key=lambda pod: Meta(pod).creation_timestamp)[-MAX_PODS_ASKED:]
            uids = [Meta(mirror).uid, *(Meta(pod).uid for pod in newest)]
            for event in await self._listed(client, route.namespace, uids, f'worker "{worker}"'):
                rows.append(panel_rules.event_row(worker, event))
        rows.sort(key=lambda row: row["lastTimestamp"])
        return Answer(200, json.dumps(panel_rules.list_body("events", rows)).encode())

    async def _listed(
        self, client: ApiClient, namespace: str, uids: list[str], where: str
    ) -> list[dict[str, Any]]:
        """The newest Events about the objects of ``uids`` (by UID, never by name)."""

        async def about(uid: str) -> list[dict[str, Any]]:
            listed = await client.list(
                EVENTS, namespace=namespace, field_selector=f"involvedObject.uid={uid}"
            )
            return list(listed.items)

        try:
            found = await asyncio.gather(*(about(uid) for uid in uids if uid))
        except ApiError as error:
            _log.warning("listing Events on %s failed: %s %s", where, error.reason, error.message)
            raise Refusal(502, f"{where} did not list the Events ({error.reason})") from None
        events = [event for batch in found for event in batch]
        events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        return events[-MAX_EVENTS:]

    # -- the dashboard's files ---------------------------------------------------------

    def _dashboard(self, name: str) -> Answer:
        if name == panel_rules.DASHBOARD_BARE:
            # Its files are named relative to the directory: send the browser there.
            return Answer(301, b"", "text/plain", headers=(("location", "dashboard/"),))
        found = panel_rules.asset(name)
        if found is None:
            raise Refusal(404, f"the dashboard has no file {name!r}", "NotFound")
        filename, content_type = found
        body = self._files.get(filename)
        if body is None:
            body = (
                importlib.resources.files("jobrelay.relayapi") / "dashboard" / filename
            ).read_bytes()
            self._files[filename] = body
        return Answer(
            200, body, content_type,
            headers=(("content-security-policy", panel_rules.DASHBOARD_POLICY),
                     ("referrer-policy", "no-referrer")),
        )  # fmt: skip


def _lifetime(text: str | None) -> float:
    """A watch's ``timeoutSeconds`` (bounded by the default lifetime)."""
    try:
        asked = float(text) if text else WATCH_LIFETIME
    except ValueError:
        raise route_rules.BadRequest(
            f"timeoutSeconds={str(text)[:20]!r}: expected seconds"
        ) from None
    return min(max(asked, 1.0), WATCH_LIFETIME)
