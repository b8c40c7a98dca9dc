"""Whom the aggregated API trusts: the front proxy of extension-apiserver-authentication."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.relayapi.route_rules import User
from jobrelay.relayapi.trust_rules import FrontProxy, common_name, front_proxy, identify

CA = "-----BEGIN CERTIFICATE-----\nMII...\n-----END CERTIFICATE-----\n"
DATA = {
    "client-ca-file": "the client CA, never used for callers",
    "requestheader-client-ca-file": CA,
    "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
    "requestheader-username-headers": json.dumps(["X-Remote-User"]),
    "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
    "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
}
PROXY = FrontProxy(CA, ("front-proxy-client",))


def test_the_configmap_is_read_as_the_apiserver_writes_it() -> None:
    assert front_proxy(DATA) == PROXY
    uid = {**DATA, "requestheader-uid-headers": '["X-Remote-Uid"]'}
    assert front_proxy(uid) == FrontProxy(
        CA, ("front-proxy-client",), uid_headers=("X-Remote-Uid",)
    )
    # No allowed names: any CN the CA signed (as Kubernetes does).
    assert front_proxy({**DATA, "requestheader-allowed-names": "[]"}) == FrontProxy(CA)
    assert front_proxy({**DATA, "requestheader-allowed-names": "null"}) == FrontProxy(CA)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (None, "requestheader-client-ca-file"),
        ({}, "requestheader-client-ca-file"),
        ({"client-ca-file": CA}, "--requestheader-"),
        ({**DATA, "requestheader-client-ca-file": " "}, "requestheader-client-ca-file"),
        ({**DATA, "requestheader-username-headers": "[]"}, "username-headers"),
        ({**DATA, "requestheader-username-headers": "not json"}, "username-headers"),
        ({**DATA, "requestheader-username-headers": '[1, "x"]'}, "username-headers"),
    ],
)
def test_without_a_front_proxy_nothing_is_trusted(data: dict[str, str] | None, why: str) -> None:
    found = front_proxy(data)
    assert isinstance(found, str) and why in found


FORWARDED = [
    ("x-remote-user", "alice"),
    ("x-remote-group", "team-a"),
    ("x-remote-group", "system:authenticated"),
    ("x-remote-extra-scopes", "read"),
    ("x-remote-extra-scopes", "write"),
    ("x-remote-extra-acme.com%2Fproject", "p1"),
    ("authorization", "Bearer ignored"),
]


@pytest.mark.parametrize(
    ("trust", "cn", "headers", "expected"),
    [
        (PROXY, "front-proxy-client", FORWARDED,
         User("alice", ("team-a", "system:authenticated"), "",
              {"scopes": ("read", "write"), "acme.com/project": ("p1",)})),
        # Header names in any case, as HTTP has them.
        (PROXY, "front-proxy-client", [("X-Remote-User", "bob")], User("bob")),
        (FrontProxy(CA), "any-cn-the-ca-signed", [("x-remote-user", "bob")], User("bob")),
        # No certificate: straight to the port, whatever the headers say.
        (PROXY, None, FORWARDED, "only the manager's apiserver"),
        # A certificate of the CA, but not an allowed name: forged headers are not read.
        (PROXY, "intruder", FORWARDED, '"intruder" is not an allowed front proxy'),
        (PROXY, "front-proxy-client", [("x-remote-group", "g")], "named no user"),
        (PROXY, "front-proxy-client", [("x-remote-user", "  ")], "named no user"),
        (None, "front-proxy-client", FORWARDED, "does not know the manager's front proxy"),
        (FrontProxy(CA, (), ("X-Remote-User",), (), (), ("X-Remote-Uid",)),
         "p", [("x-remote-user", "u"), ("x-remote-uid", "42"), ("x-remote-group", "g")],
         User("u", (), "42")),
    ],
)  # fmt: skip
def test_identify(
    trust: FrontProxy | None, cn: str | None, headers: list[tuple[str, str]], expected: object
) -> None:
    found = identify(trust, cn, headers)
    if isinstance(expected, User):
        assert found == expected
    else:
        assert isinstance(found, str) and str(expected) in found


_HEADER = st.sampled_from(["x-remote-user", "x-remote-group", "x-remote-extra-k", "other"])


@given(
    st.one_of(st.none(), st.sampled_from(["front-proxy-client", "intruder", ""])),
    st.lists(st.tuples(_HEADER, st.text(max_size=8)), max_size=6),
)
def test_only_an_allowed_front_proxy_names_a_user(
    cn: str | None, headers: list[tuple[str, str]]
) -> None:
    found = identify(PROXY, cn, headers)
    if isinstance(found, User):
        assert cn == "front-proxy-client" and found.name.strip()
        assert found.name in [value.strip() for name, value in headers if name == "x-remote-user"]


def test_common_name_of_a_peer_certificate() -> None:
    peercert = {"subject": ((("organizationName", "o"),), (("commonName", "front-proxy-client"),))}
    assert common_name(peercert) == "front-proxy-client"
    assert common_name(None) is None
    assert common_name({}) is None


def test_a_subject_with_several_cns_or_none_names_no_front_proxy() -> None:
    # Go's x509 takes the last CN, a naive reader the first: neither is trusted.
    two = {"subject": ((("commonName", "front-proxy-client"),), (("commonName", "mallory"),))}
    assert common_name(two) == ""
    assert common_name({"subject": ((("organizationName", "o"),),)}) == ""
    for proxy in (PROXY, FrontProxy(client_ca="CA")):  # allowed names listed, or any
        found = identify(proxy, common_name(two), [("X-Remote-User", "alice")])
        assert found == "the client certificate does not name exactly one CN: it is no front proxy"


def test_the_user_comes_from_the_username_headers_never_the_certificate() -> None:
    anyone = FrontProxy(client_ca="CA")
    assert identify(anyone, "alice", []) == "the front proxy named no user"
    assert identify(anyone, "alice", [("X-Remote-Uid", "bob")]) == "the front proxy named no user"
    found = identify(anyone, "front-proxy-client", [("X-Remote-User", "bob")])
    assert isinstance(found, User) and found.name == "bob"
