"""The controller's one cache of SubjectAccessReview answers.

Every check the aggregated API makes (a user's logs, a mirror, the panel's views
and each scope of rows a viewer may see) asks the manager here: one answer per
user and attributes, reused for :data:`REVIEW_TTL` seconds, so a dashboard's
repeated questions cost one review, and a revoked right stops working within
that time everywhere at once (the webhook authorizer caches longer).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jobrelay.relayapi import route_rules

__all__ = ["MAX_REVIEWS", "REVIEW_TTL", "AccessReviews"]

# A SubjectAccessReview's answer is reused this long (a dashboard asks the same often).
REVIEW_TTL = 10.0
# Answers kept at most (all are dropped when full: a flood of distinct questions costs
# reviews, never memory).
MAX_REVIEWS = 4096

_Key = tuple[Any, ...]


def _key(user: route_rules.User, attributes: Mapping[str, str]) -> _Key:
    extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
    return (user.name, user.groups, user.uid, extra, tuple(sorted(attributes.items())))


class AccessReviews:
    """Whether the manager lets a user do something, asked once per :data:`REVIEW_TTL`."""

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
        self._answers: dict[_Key, tuple[float, bool]] = {}

    def clear(self) -> None:
        """Forget every answer (each is asked again)."""
        self._answers.clear()

    def known(self, user: route_rules.User, **attributes: str) -> bool | None:
        """The answer while it is fresh; None when it must be asked (again)."""
        found = self._answers.get(_key(user, attributes))
        if found is None or found[0] <= self._clock():
            return None
        return found[1]

    async def allowed(self, user: route_rules.User, **attributes: str) -> bool:
        """The fresh answer, or the manager's (its errors are the caller's to tell)."""
        key = _key(user, attributes)
        found = self._answers.get(key)
        if found is not None and found[0] > self._clock():
            return found[1]
        review = await self._ask(route_rules.access_review(user, **attributes))
        granted = route_rules.allowed(review)
        if len(self._answers) >= self._max:
            self._answers.clear()
        self._answers[key] = (self._clock() + self._ttl, granted)
        return granted
