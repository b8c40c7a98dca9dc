"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Candidates read the Lease every retry period; one whose holder is gone
(released, or not renewed for a lease duration as this process measured it)
takes it over with a compare-and-swap update. The leader renews every retry
period, optimistically from its own last write; a renewal that has not
succeeded within the renew deadline ends its leadership, and its
``on_started_leading`` task is cancelled before ``run`` raises
:class:`LeadershipLost`. The decisions are the pure functions of
``kube.election.rules``; this module only does their I/O.

Give the elector a client of its own: renewals then never queue behind the
controller's requests for a connection (controller-runtime does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import socket
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.election.election_rules import (
    RETRY_JITTER,
    Acquire,
    ElectionTiming,
    Observation,
    Wait,
    decide,
    leading_until,
    lease_body,
    observe,
    released,
)
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import LEASES

__all__ = ["Elector", "LeadershipLost", "new_identity"]

_log = logging.getLogger(__name__)


class LeadershipLost(RuntimeError):
    """The lease was not renewed in time: this process must stop acting (and exit)."""


def new_identity() -> str:
    """A holder identity unique to this process: host (the pod's name), PID, and a random part."""
    return f"{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(4)}"


class Elector:
    """Campaigns for one Lease and keeps it while leading."""

    def __init__(
        self,
        client: ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        timing: ElectionTiming,
        rng: random.Random | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        problems = timing.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.identity = identity
        self.namespace = namespace
        self.name = name
        self._client = client
        self._timing = timing
        self._rng = rng or random.Random()
        # Written on the Lease with each acquire and renewal (the leader's version, say).
        self._annotations = dict(annotations or {})
        self._observed: Observation | None = None
        self._lease: Mapping[str, Any] | None = None  # the last Lease read or written
        self._leading = False
        self._deadline = 0.0  # loop time until which the leader may act
        self._reported_holder: str | None = None
        self._problem: str | None = None

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_leader(self) -> bool:
        """Between acquiring the lease and the end of ``on_started_leading`` (or its loss)."""
        return self._leading

    @property
    def leader(self) -> str:
        """The holder as this process last saw it ("" when free or not read yet)."""
        if self._leading:
            return self.identity
        record = self._observed.record if self._observed is not None else None
        return record.holder if record is not None else ""

    def holds_lease(self) -> bool:
        """Whether this process may write now: leading, and the renew deadline not passed.

        Checked before every write (``ApiClient.write_fence``), so no write starts
        once the deadline has passed, even before the loss is handled.
        """
        return self._leading and asyncio.get_running_loop().time() < self._deadline

    async def run(
        self,
        stop: asyncio.Event,
        on_started_leading: Callable[[], Coroutine[Any, Any, None]],
        on_stopped_leading: Callable[[], None] | None = None,
    ) -> None:
        """Stand by until the lease is ours, then run ``on_started_leading`` while renewing it.

        - ``stop`` set while standing by: returns.
        - ``on_started_leading`` returns (it watches ``stop`` itself, and stops
          its work first): the lease is released, so a standby takes over at its
          next try, and ``run`` returns (raising what it raised, if it failed).
        - no renewal within the renew deadline: ``on_started_leading`` is cancelled
          and awaited, ``on_stopped_leading`` called, :class:`LeadershipLost` raised.
        """
        _log.info(
            "campaigning for lease %s as %s", self.lease, self.identity, extra={"event": "campaign"}
        )
        while not await self._try_bounded():
            if await _sleep_unless(stop, self._jittered_retry()):
                return
        if stop.is_set():
            # Stopped while this try won: hand it back at once.
            await self._release()
            return
        self._leading = True
        _log.info(
            "became leader: lease %s acquired by %s (transitions: %s)",
            self.lease,
            self.identity,
            self._transitions(),
            extra={"event": "leading"},
        )
        lead = asyncio.get_running_loop().create_task(on_started_leading(), name="leading")
        lost: str | None = None
        try:
            lost = await self._renew_while(lead)
        finally:
            if not lead.done():
                # Lost, or run() itself failed or was cancelled: stop acting first.
                lead.cancel()
                await asyncio.wait({lead})
            self._leading = False
            if lost is None:
                await self._release()
            if on_stopped_leading is not None:
                on_stopped_leading()
        if lost is not None:
            raise LeadershipLost(
                f"lease {self.lease} not renewed within {self._timing.renew_deadline:g}s ({lost})"
            )
        if not lead.cancelled():
            lead.result()  # its failure is ours

    # -- one try -------------------------------------------------------------------

    async def _try_bounded(self) -> bool:
        """One acquire try, given at most a renew deadline (a silent apiserver must not stall it)."""
        try:
            async with asyncio.timeout(self._timing.renew_deadline):
                return await self._try()
        except TimeoutError:
            self._report_problem(f"no answer within {self._timing.renew_deadline:g}s")
            return False

    async def _try(self) -> bool:
        """Read, decide, write: whether this process holds the lease now."""
        loop = asyncio.get_running_loop()
        sent = loop.time()
        try:
            if self._leading and self._observed is not None and self._observed.record is not None:
                # The leader renews from its own last write, without a read (client-go's
                # fast path); a conflict means someone else wrote, NotFound that someone
                # deleted it: read and decide again.
                decision = decide(self._observed, sent, self.identity, self._timing, _wall())
                try:
                    if isinstance(decision, Acquire):
                        return await self._write(decision, sent)
                except ApiError as error:
                    if not (error.is_conflict or error.is_not_found):
                        raise
            lease = await self._read()
            self._lease = lease
            self._observed = observe(self._observed, lease, loop.time())
            decision = decide(self._observed, loop.time(), self.identity, self._timing, _wall())
            if isinstance(decision, Wait):
                if self._leading:  # someone took it behind our back
                    self._report_problem(f"the lease is now held by {decision.holder}")
                    return False
                self._clear_problem()
                self._report_holder(decision)
                return False
            return await self._write(decision, sent)
        except ApiError as error:
            if error.is_conflict or error.is_already_exists:
                _log.debug("lease %s: another candidate wrote first: %s", self.lease, error)
                return False
            self._report_problem(str(error))
            return False

    async def _read(self) -> dict[str, Any] | None:
        try:
            return await self._client.get(LEASES, self.name, namespace=self.namespace)
        except ApiError as error:
            if error.is_not_found:
                return None
            raise

    async def _write(self, decision: Acquire, sent: float) -> bool:
        body = lease_body(
            self.name,
            self.namespace,
            decision.record,
            resource_version=decision.resource_version,
            base=None if decision.create else self._lease,
            annotations=self._annotations,
        )
        if decision.create:
            written = await self._client.create(LEASES, body, namespace=self.namespace)
        else:
            written = await self._client.replace(LEASES, body, namespace=self.namespace)
        loop = asyncio.get_running_loop()
        self._lease = written
        self._observed = observe(self._observed, written, loop.time())
        self._clear_problem()
        until = leading_until(sent, self._timing)
        if loop.time() >= until:
            # The answer came too late to act on; the next try renews it.
            return False
        self._deadline = until
        return True

    async def _release(self) -> None:
        record = self._observed.record if self._observed is not None else None
        if self._observed is None or record is None or record.holder != self.identity:
            return
        body = lease_body(
            self.name,
            self.namespace,
            released(record, _wall()),
            resource_version=self._observed.resource_version,
            base=self._lease,
        )
        try:
            async with asyncio.timeout(self._timing.renew_deadline):
                await self._client.replace(LEASES, body, namespace=self.namespace)
        except (ApiError, TimeoutError) as error:
            _log.warning(
                "could not release lease %s (%s): a standby takes over when it expires",
                self.lease,
                error or "timed out",
            )
            return
        _log.info("released lease %s", self.lease, extra={"event": "released"})

    # -- leading -------------------------------------------------------------------

    async def _renew_while(self, lead: asyncio.Task[None]) -> str | None:
        """Renew every retry period until ``lead`` ends (None) or the deadline passes (why)."""
        try:
            async with asyncio.timeout_at(self._deadline) as scope:
                while True:
                    await asyncio.wait({lead}, timeout=self._timing.retry_period)
                    if lead.done():
                        return None
                    if await self._try():
                        scope.reschedule(self._deadline)
        except TimeoutError:
            if lead.done():
                return None
            return self._problem or "no renewal succeeded"

    # -- reporting -----------------------------------------------------------------

    def _report_holder(self, waiting: Wait) -> None:
        if waiting.holder == self._reported_holder:
            return
        self._reported_holder = waiting.holder
        _log.info(
            "standing by: lease %s is held by %s (this replica: %s; it expires in %.0fs "
            "unless renewed)",
            self.lease,
            waiting.holder,
            self.identity,
            waiting.expires_in,
            extra={"event": "standby", "leader": waiting.holder},
        )

    def _report_problem(self, problem: str) -> None:
        if self._leading:
            left = self._deadline - asyncio.get_running_loop().time()
            _log.warning(
                "lease %s: renewal failed, %.1fs left before this replica must stop: %s",
                self.lease,
                max(left, 0.0),
                problem,
            )
        elif problem != self._problem:
            _log.warning("lease %s: cannot read or take it: %s", self.lease, problem)
        self._problem = problem

    def _clear_problem(self) -> None:
        if self._problem is not None:
            _log.info("lease %s: reachable again", self.lease)
            self._problem = None

    def _transitions(self) -> int:
        record = self._observed.record if self._observed is not None else None
        return record.transitions if record is not None else 0

    def _jittered_retry(self) -> float:
        period = self._timing.retry_period
        return self._rng.uniform(period, period * (1 + RETRY_JITTER))


async def _sleep_unless(event: asyncio.Event, delay: float) -> bool:
    """Wait ``delay`` seconds or until ``event`` is set; whether it is set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(delay):
            await event.wait()
    return event.is_set()


def _wall() -> datetime:
    return datetime.now(UTC)
