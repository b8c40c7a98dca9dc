"""The name of the Lease a controller holds, from its controller name: read by the controller
(its leader election) and by the CLI (who leads, with which kinds), so said once here."""

from __future__ import annotations

import re

__all__ = ["lease_name_for"]

_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def lease_name_for(controller_name: str) -> str:
    """A DNS-safe Lease name from a controller name: ``jobrelay.dev/relay`` -> ``jobrelay-relay``.

    The domain's first label and the path, so each controller name on one
    manager has a Lease of its own.
    """
    domain, _, path = controller_name.lower().partition("/")
    parts = [domain.split(".", 1)[0], path] if path else [domain]
    name = _NOT_DNS.sub("-", "-".join(parts)).strip("-")[:63].strip("-")
    return name or "jobrelay"
