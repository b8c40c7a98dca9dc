"""Whether `jobrelay run` serves and registers the aggregated API (``--api-register``): pure.

The aggregator can reach a controller run outside the manager only when both run on
one host: the registration's Service names 127.0.0.1 (``registration_rules``). So
``auto``, the default, registers exactly when the manager's own URL is on loopback
(the local fleet, the README's first hour), and then also serves the API on a free
loopback port if ``--api-address`` names none: a plain ``jobrelay run`` there gives
``jobrelay logs`` and the dashboard. Anywhere else ``auto`` registers nothing and
serves only what ``--api-address`` asks for (an in-cluster controller is registered
by the chart, whose Service reaches every replica).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "ALWAYS",
    "AUTO",
    "LOOPBACK_API_ADDRESS",
    "NEVER",
    "REGISTER_MODES",
    "ApiServingChoice",
    "choose_api_serving",
    "on_loopback",
]

AUTO = "auto"
ALWAYS = "always"
NEVER = "never"
REGISTER_MODES = (AUTO, ALWAYS, NEVER)
# Where ``auto`` serves when --api-address names nothing: a free port, loopback only.
LOOPBACK_API_ADDRESS = "127.0.0.1:0"


@dataclass(frozen=True)
class ApiServingChoice:
    """What `jobrelay run` does with the API: serve it at ``address`` ("" none) and, as
    leader, register it (``register``), and why, for its start-up log line."""

    address: str
    register: bool
    why: str


def on_loopback(server_url: str) -> bool:
    """Whether an apiserver URL names this host: 127.0.0.0/8, ::1 or localhost."""
    try:
        host = urlsplit(server_url if "//" in server_url else f"//{server_url}").hostname
    except ValueError:
        return False
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def choose_api_serving(mode: str, address: str, server_url: str) -> ApiServingChoice:
    """``--api-register MODE`` with ``--api-address address`` against a manager at
    ``server_url``. ``always`` and ``never`` do what they say (nothing is registered
    without an address to serve on); ``auto`` as the module says."""
    if mode not in REGISTER_MODES:
        raise ValueError(f"--api-register: {mode!r} is not one of {', '.join(REGISTER_MODES)}")
    if mode == NEVER:
        return ApiServingChoice(address, False, "--api-register never")
    if mode == ALWAYS:
        if not address:
            return ApiServingChoice("", False, "--api-register without --api-address: no API")
        return ApiServingChoice(address, True, "--api-register always")
    if not on_loopback(server_url):
        why = "auto: the manager is not on loopback, so it cannot reach this process"
        return ApiServingChoice(address, False, why)
    return ApiServingChoice(
        address or LOOPBACK_API_ADDRESS, True, "auto: the manager is on loopback (this host)"
    )
