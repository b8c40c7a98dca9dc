"""The secret scan itself: it finds a planted secret, whole or cut, and nothing else."""

from __future__ import annotations

import base64
import json
import secrets

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.leakscan import (
    WINDOW,
    Needles,
    Secret,
    data_core,
    kubeconfig_secrets,
    pem_secrets,
    scan,
    secret_object_secrets,
    token_file_secrets,
)

TOKEN = secrets.token_urlsafe(32)


def private_key_pem(byte: str) -> str:
    """A P-256 key whose secret is ``byte`` repeated: fixed, so that no test depends on
    two random keys happening to share a character past their common structure."""
    key = ec.derive_private_key(int(byte * 32, 16), ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


KEY_PEM = private_key_pem("1d")
KEY_DATA = base64.b64encode(KEY_PEM.encode()).decode()
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [
        {"name": "cert", "user": {"client-key-data": KEY_DATA}},
        {"name": "token", "user": {"token": TOKEN}},
    ],
}


def needles() -> Needles:
    # Another key of the same type: what every such key shares is structure, not secret.
    return Needles.of(
        kubeconfig_secrets(KUBECONFIG, "worker-1"),
        public=pem_secrets(private_key_pem("2e"), "reference"),
    )


def test_a_planted_token_in_a_log_line_is_found() -> None:
    log = "\n".join(
        [
            json.dumps({"msg": "placed job", "cluster": "worker-1"}),
            json.dumps({"msg": "worker-1 refused", "error": f"Bearer {TOKEN}"}),
        ]
    )
    report = scan([("controller.log", log)], needles())
    assert [(leak.source, leak.secret) for leak in report.leaks] == [
        ("controller.log:2", "worker-1 users[token].token")
    ]
    assert report.lines == 2 and report.sources == 1 and report.bytes == len(log)


def test_a_truncated_token_is_found_and_a_short_stretch_is_not() -> None:
    assert scan([("e", f"token={TOKEN[5 : 5 + WINDOW]}...")], needles()).leaks
    assert not scan([("e", f"token={TOKEN[5 : 5 + WINDOW - 1]}...")], needles()).leaks


def test_a_pem_key_is_found_in_every_form_it_may_leak_in() -> None:
    body_line = KEY_PEM.splitlines()[2]  # the first begins with what all keys share
    forms = {
        "pem": KEY_PEM,
        "json-escaped pem": json.dumps({"error": KEY_PEM}),
        "one body line": f"bad key: {body_line[:40]}",
        "as *-data": f"client-key-data: {KEY_DATA}",
        "middle of *-data": KEY_DATA[len(KEY_DATA) // 2 : len(KEY_DATA) // 2 + 30],
        "yaml error": f"could not parse: {yaml.safe_dump({'k': KEY_DATA})[100:180]!r}",
    }
    for form, text in forms.items():
        assert scan([(form, text)], needles()).leaks, form


def test_what_every_pem_file_shares_is_not_a_secret() -> None:
    """Another key's headers, and its base64 with the same headers, match nothing."""
    other = private_key_pem("3f")
    other_data = base64.b64encode(other.encode()).decode()
    report = scan([("other", other), ("other data", other_data)], needles())
    assert report.leaks == []


def test_data_core_drops_exactly_the_shared_header_and_footer() -> None:
    core = data_core(KEY_DATA)
    assert core and core in KEY_DATA
    assert not core.startswith(base64.b64encode(b"-----BEGIN")[:8].decode())
    assert data_core("not base64!") == "not base64!"


def test_token_files_secrets_and_kubeconfig_secrets_are_read() -> None:
    tokens = token_file_secrets(f'{TOKEN},admin,admin,"system:masters"\n', "tokens.csv")
    assert tokens == [Secret("tokens.csv (token of admin)", TOKEN)]
    labels = {secret.label for secret in pem_secrets(KEY_PEM, "admin.key")}
    assert labels == {"admin.key (private key body)", "admin.key (as *-data)"}
    stored = {
        "metadata": {"namespace": "jobrelay-system", "name": "worker-w-kubeconfig"},
        "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(KUBECONFIG).encode()).decode()},
    }
    found = {secret.value for secret in secret_object_secrets(stored)}
    assert TOKEN in found and stored["data"]["kubeconfig"] in found


def test_short_values_are_counted_not_scanned() -> None:
    made = Needles.of([Secret("short", "x" * (WINDOW - 1)), Secret("token", TOKEN)])
    assert (made.secrets, made.too_short) == (1, 1)


def test_stretches_two_secrets_share_are_structure() -> None:
    """Two keys of one type share their ASN.1 prefix: it matches neither, the rest does."""
    first, second = private_key_pem("5a"), private_key_pem("6b")
    made = Needles.of(pem_secrets(first, "a") + pem_secrets(second, "b"))
    assert made.shared > 0
    third = private_key_pem("c3")
    assert not scan([("third", third)], made).leaks
    assert scan([("second", second)], made).leaks


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    before=st.text(max_size=200),
    after=st.text(max_size=200),
    start=st.integers(0, len(TOKEN) - WINDOW),
    length=st.integers(WINDOW, len(TOKEN)),
)
def test_any_long_enough_stretch_anywhere_is_found(
    before: str, after: str, start: int, length: int
) -> None:
    stretch = TOKEN[start : start + length]
    assert scan([("text", before + stretch + after)], needles()).leaks
