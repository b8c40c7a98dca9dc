"""The controller's one cache of SubjectAccessReview answers.

Every check the aggregated API makes (a user's logs, a mirror, the panel's views
and each scope of rows a viewer may see) asks the manager here: one answer per
user and attributes, reused for :data:`REVIEW_TTL` seconds, so a dashboard's
repeated questions cost one review, and a revoked right stops working within
that time everywhere at once (the webhook authorizer caches longer).

A question already being asked is not asked again: every request that needs it
awaits the one review in flight (200 watches of one user cost one review per
question, not 200). The answers are a least-recently-used cache of at most
:data:`MAX_REVIEWS`: a flood of distinct questions evicts the oldest answers one by
one, never every viewer's at once. The reviews go through a manager client of
their own (the runner's), so that a flood of them never queues the informers' or
the status writes' requests behind it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jobrelay.relayapi import route_rules

__all__ = ["MAX_REVIEWS", "REVIEW_TTL", "AccessReviews"]

# A SubjectAccessReview's answer is reused this long (a dashboard asks the same often).
REVIEW_TTL = 10.0
# Answers kept at most (the least recently used go first).
MAX_REVIEWS = 4096

_Key = tuple[Any, ...]


def _key(user: route_rules.User, attributes: Mapping[str, str]) -> _Key:
    extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
    return (user.name, user.groups, user.uid, extra, tuple(sorted(attributes.items())))


class AccessReviews:
    """Whether the manager lets a user do something, asked once per :data:`REVIEW_TTL`
    and once at a time."""

    def __init__(
        self,
        ask: Callable[[dict[str, Any]], Awaitable[Mapping[str, Any]]],
        *,
        ttl: float = REVIEW_TTL,
        max_entries: int = MAX_REVIEWS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ask = ask  # posts a SubjectAccessReview, returns the answered one
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        # Answers by question, with when each expires; the most recently used last.
        self._answers: collections.OrderedDict[_Key, tuple[float, bool]] = collections.OrderedDict()
        # The review in flight of each question being asked.
        self._asking: dict[_Key, asyncio.Future[bool]] = {}
        # Reviews posted since start (each question in flight counts once).
        self.asked = 0

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def in_flight(self) -> int:
        return len(self._asking)

    def clear(self) -> None:
        """Forget every answer (each is asked again)."""
        self._answers.clear()

    def _fresh(self, key: _Key) -> bool | None:
        found = self._answers.get(key)
        if found is None:
            return None
        if found[0] <= self._clock():
            del self._answers[key]  # expired: asked again, never answered from memory
            return None
        self._answers.move_to_end(key)
        return found[1]

    def known(self, user: route_rules.User, **attributes: str) -> bool | None:
        """The answer while it is fresh; None when it must be asked (again)."""
        return self._fresh(_key(user, attributes))

    async def allowed(self, user: route_rules.User, **attributes: str) -> bool:
        """The fresh answer, or the manager's (its errors are the caller's to tell);
        while the same question is being asked, its answer."""
        key = _key(user, attributes)
        found = self._fresh(key)
        if found is not None:
            return found
        asking = self._asking.get(key)
        if asking is None:
            asking = asyncio.get_running_loop().create_task(self._review(key, user, attributes))
            asking.add_done_callback(_retrieved)
            self._asking[key] = asking
        # A caller that goes away (its request cancelled) leaves the review to the others.
        return await asyncio.shield(asking)

    async def _review(
        self, key: _Key, user: route_rules.User, attributes: Mapping[str, str]
    ) -> bool:
        try:
            self.asked += 1
            review = await self._ask(route_rules.access_review(user, **attributes))
            granted = route_rules.allowed(review)
            self._answers[key] = (self._clock() + self._ttl, granted)
            self._answers.move_to_end(key)
            while len(self._answers) > self._max:
                self._answers.popitem(last=False)
            return granted
        finally:
            del self._asking[key]


def _retrieved(task: asyncio.Future[bool]) -> None:
    """Its failure is its waiters' to raise; with none left, it is not logged as lost."""
    if not task.cancelled():
        task.exception()
