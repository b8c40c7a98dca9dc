"""The visibility route: ``GET .../namespaces/NS/pendingworkloads`` (``pending_rules``).

Authorised per namespace, as Kueue's visibility API is: the caller sees the waiting
workloads of the kinds it may ``list`` in that namespace on the management cluster
(a SubjectAccessReview each, through the one review cache), and gets 403 when it may
list none. No RelayQueue read is needed: the positions and figures are the
controller's, computed over every workload; other namespaces' workloads are counted,
never named.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from jobrelay.relayapi import route_rules
from jobrelay.relayapi.httpserver import Answer
from jobrelay.relayapi.panel_routes import Refusal
from jobrelay.relayapi.pending_rules import PendingPlan, pending_workloads_body

__all__ = ["PendingRoutes"]


class PendingRoutes:
    def __init__(
        self,
        review: Callable[..., Awaitable[bool]],
        kinds: Callable[[], Mapping[str, tuple[str, str]]],
        last_plan: Callable[[], PendingPlan | None],
        queues: Callable[[], Iterable[Mapping[str, Any]]],
    ) -> None:
        self._review = review
        self._kinds = kinds  # Kind -> (plural, API group) of every dispatched kind
        self._last_plan = last_plan
        self._queues = queues

    async def serve(self, user: route_rules.User, namespace: str) -> Answer:
        kinds = self._kinds()
        allowed = [
            kind for kind, (plural, group) in sorted(kinds.items())
            if await self._review(user, verb="list", group=group, resource=plural,
                                  namespace=namespace)
        ]  # fmt: skip
        if not allowed:
            plurals = ", ".join(sorted(plural for plural, _ in kinds.values()))
            raise Refusal(
                403,
                f'user "{user.name}" cannot list {plurals} in namespace "{namespace}" '
                "on the management cluster",
                "Forbidden",
            )
        body = pending_workloads_body(self._last_plan(), namespace, allowed, self._queues())
        return Answer(200, json.dumps(body).encode())
