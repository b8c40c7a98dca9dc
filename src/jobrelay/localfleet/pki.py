"""A local certificate authority for the fleet's apiservers and their clients.

One CA signs every cluster's serving certificate and the client certificates
of the admin, kube-controller-manager and kube-scheduler identities, so that
RBAC and TLS are on exactly as in a real cluster. Each apiserver also accepts
static bearer tokens (``--token-auth-file``), the other credential kind a
worker's kubeconfig may carry.
"""

from __future__ import annotations

import csv
import datetime
import io
import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys are generated in microseconds, unlike RSA: the fleet comes up faster.
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} is not an EC private key")
    return key


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def ensure_ca(directory: Path, *, common_name: str = "jobrelay-localfleet-ca") -> CertPair:
    """Create the CA in ``directory`` unless it is already there."""
    pair = CertPair(directory / "ca.crt", directory / "ca.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    directory.mkdir(parents=True, exist_ok=True)
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY * 10)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _write_key(key, pair.key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def issue(
    ca: CertPair,
    out_dir: Path,
    stem: str,
    *,
    common_name: str,
    organization: str | None = None,
    server_hosts: tuple[str, ...] = (),
) -> CertPair:
    """Issue a client certificate, or a serving one when ``server_hosts`` is given.

    Existing files are kept: a restarted fleet keeps the identities its
    kubeconfigs already reference.
    """
    pair = CertPair(out_dir / f"{stem}.crt", out_dir / f"{stem}.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    out_dir.mkdir(parents=True, exist_ok=True)
    ca_key = _load_key(ca.key)
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server_hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server_hosts:
        names: list[x509.GeneralName] = []
        for host in server_hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(key, pair.key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def ensure_service_account_key(directory: Path) -> tuple[Path, Path]:
    """The key pair the apiserver signs service account tokens with."""
    private, public = directory / "sa.key", directory / "sa.pub"
    if private.exists() and public.exists():
        return private, public
    directory.mkdir(parents=True, exist_ok=True)
    key = _new_key()
    _write_key(key, private)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


@dataclass(frozen=True)
class TokenUser:
    """A user the apiserver knows by a static bearer token."""

    name: str
    groups: tuple[str, ...] = ()


def ensure_static_tokens(path: Path, users: Sequence[TokenUser]) -> dict[str, str]:
    """The token of each user (by name), from the apiserver's ``--token-auth-file``.

    Tokens already in the file are kept (a restarted fleet's kubeconfigs stay
    valid); a user without one gets a fresh random token. The file's lines are
    ``token,user,uid,"group1,group2"``, as kube-apiserver reads them.
    """
    known: dict[str, str] = {}
    if path.exists():
        for row in csv.reader(io.StringIO(path.read_text())):
            if len(row) >= 2:
                known[row[1]] = row[0]
    tokens = {user.name: known.get(user.name) or secrets.token_urlsafe(32) for user in users}
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    for user in users:
        writer.writerow([tokens[user.name], user.name, user.name, ",".join(user.groups)])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)  # private before a secret is written into it
    path.chmod(0o600)
    if path.read_text() != text.getvalue():
        path.write_text(text.getvalue())
    return tokens
