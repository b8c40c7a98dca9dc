"""`jobrelay run --api-register auto|always|never`: what is served and registered, and why."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.relayapi.auto_register_rules import (
    LOOPBACK_API_ADDRESS,
    choose_api_serving,
    on_loopback,
)


@pytest.mark.parametrize(
    ("server", "loopback"),
    [
        ("https://127.0.0.1:6443", True),
        ("https://127.1.2.3:6443", True),
        ("https://[::1]:6443", True),
        ("https://localhost:6443", True),
        ("https://LOCALHOST.:6443", True),
        ("127.0.0.1:6443", True),
        ("https://10.96.0.1:443", False),
        ("https://kubernetes.default.svc", False),
        ("https://[2001:db8::1]:6443", False),
        ("https://localhost.example.com", False),
        ("https://128.0.0.1", False),
        ("", False),
        ("https://[::1", False),
    ],
)
def test_which_manager_urls_are_on_loopback(server: str, loopback: bool) -> None:
    assert on_loopback(server) is loopback


LOCAL, REMOTE = "https://127.0.0.1:6443", "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("mode", "address", "server", "served"),
    [
        # auto: registered exactly when the manager can reach this host.
        ("auto", "", LOCAL, (LOOPBACK_API_ADDRESS, True)),
        ("auto", "127.0.0.1:8443", LOCAL, ("127.0.0.1:8443", True)),
        ("auto", "", REMOTE, ("", False)),
        ("auto", ":8443", REMOTE, (":8443", False)),
        # always and never do what they say.
        ("always", ":8443", REMOTE, (":8443", True)),
        ("always", "", LOCAL, ("", False)),
        ("never", "", LOCAL, ("", False)),
        ("never", ":8443", LOCAL, (":8443", False)),
    ],
)
def test_what_each_mode_serves_and_registers(
    mode: str, address: str, server: str, served: tuple[str, bool]
) -> None:
    choice = choose_api_serving(mode, address, server)
    assert (choice.address, choice.register) == served
    assert choice.why


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="auto"):
        choose_api_serving("yes", "", LOCAL)


@given(st.ip_addresses(), st.sampled_from(["auto", "always", "never"]), st.booleans())
def test_registered_only_when_something_is_served_and_never_by_auto_off_host(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, mode: str, with_address: bool
) -> None:
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    choice = choose_api_serving(mode, ":8443" if with_address else "", f"https://{host}:6443")
    if choice.register:
        assert choice.address
    if mode == "auto":
        assert choice.register is ip.is_loopback
    if with_address:
        assert choice.address == ":8443"
