"""Whether a controller leads this manager: `jobrelay get` and `jobrelay version` say so
when none holds a fresh Lease, instead of letting workloads show `Pending` forever.

The decision is :func:`~jobrelay.kube.election.election_rules.lease_freshness` (pure);
here are its wording (pure) and the one read of the Lease, which never fails the
command: any error but a 404 or a 403 means "say nothing".
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from jobrelay.cli.terminal import safe
from jobrelay.cli.workloads import human_duration
from jobrelay.kube.election.election_rules import LeaseFreshness, LeaseState, lease_freshness

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

__all__ = ["controller_lease_warning", "lease_state_text", "read_lease_freshness"]

# The read must not slow `get` noticeably: past this, it is given up (no warning).
LEASE_READ_TIMEOUT_SECONDS = 3.0
_HOLDER_CHARS = 253  # whoever may update the Lease writes its holder: bounded


def lease_state_text(freshness: LeaseFreshness, lease_ref: str, now: datetime) -> str:
    """How the Lease stands, in a few words: ``jobrelay-system/jobrelay-relay last renewed
    5m ago by pod-a`` (the parenthesis of the warning, and `version`'s server line)."""
    holder = freshness.holder[:_HOLDER_CHARS]
    if freshness.state is LeaseState.ABSENT:
        return f"no Lease {lease_ref}"
    if freshness.state is LeaseState.UNKNOWN:
        return f"Lease {lease_ref} not readable by you"
    if freshness.renewed_at is None:
        return f"{lease_ref} held by {holder or 'nobody'}, never renewed"
    ago = human_duration(max(0.0, (now - freshness.renewed_at).total_seconds()))
    if not holder:
        return f"{lease_ref} released {ago} ago by its last holder"
    return f"{lease_ref} last renewed {ago} ago by {holder}"


def controller_lease_warning(
    freshness: LeaseFreshness | None, lease_ref: str, now: datetime, namespace_flag: str
) -> str | None:
    """The one warning line for stderr, or None: fresh, unknown (a tenant may not read
    Leases: not nagged) or not read at all. ``namespace_flag`` is the option that points
    this command at the controller's namespace."""
    if freshness is None or freshness.state in (LeaseState.FRESH, LeaseState.UNKNOWN):
        return None
    if freshness.state is LeaseState.ABSENT:
        return safe(
            f"warning: no jobrelay controller has run against this manager (no Lease "
            f"{lease_ref}): workloads are not dispatched; if it runs in another namespace or "
            f"under another name, pass {namespace_flag} and --controller-name (one run with "
            "--no-leader-elect writes no Lease)"
        )
    where = lease_state_text(freshness, lease_ref, now)
    return safe(
        f"warning: no jobrelay controller holds a fresh lease ({where}): workloads are not "
        "dispatched; is the controller running?"
    )


async def read_lease_freshness(
    client: ApiClient, namespace: str, lease_name: str, now: datetime
) -> LeaseFreshness | None:
    """The Lease's freshness at ``now``; None when it could not be read (no warning then)."""
    import asyncio

    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import LEASES

    try:
        async with asyncio.timeout(LEASE_READ_TIMEOUT_SECONDS):
            lease = await client.get(LEASES, lease_name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            return lease_freshness(None, now)
        if error.code in (401, 403):
            return lease_freshness(None, now, readable=False)
        return None
    except Exception:  # a hint must never fail the command it decorates
        return None
    return lease_freshness(lease, now)
