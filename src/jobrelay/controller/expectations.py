"""Our own writes that the informer caches do not show yet.

After jobrelay creates a mirror, the worker's cache lacks it until the watch
event arrives; a reconcile in between (our placement patch triggers one) would
otherwise try to create it again, and after a delete, try to delete it again.
Like client-go's ControllerExpectations, each expectation lasts until the cache
catches up or a timeout passes (a lost event then costs one extra API read,
never a wrong write: creates and deletes stay idempotent). In memory only: a
restarted controller starts from freshly listed caches, which show everything.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

_SWEEP_ABOVE = 4096


class Expectations:
    def __init__(self, timeout: float = 30.0) -> None:
        self._timeout = timeout
        self._until: dict[Hashable, float] = {}

    def expect(self, what: Hashable) -> None:
        now = time.monotonic()
        if len(self._until) > _SWEEP_ABOVE:
            self._until = {key: until for key, until in self._until.items() if until > now}
        self._until[what] = now + self._timeout

    def pending(self, what: Hashable) -> bool:
        """Whether ``what`` was expected recently and the cache has not confirmed it."""
        until = self._until.get(what)
        if until is None:
            return False
        if until <= time.monotonic():
            del self._until[what]
            return False
        return True

    def observed(self, what: Hashable) -> None:
        self._until.pop(what, None)

    def __len__(self) -> int:
        return len(self._until)
