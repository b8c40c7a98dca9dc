"""The API's serving certificate (given, or self-signed at start) and its TLS context."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "certificate_authority",
    "load_cert_chain",
    "self_signed",
    "server_context",
    "signed_serving_certificate",
]

_VALIDITY = datetime.timedelta(days=365)
# Issued a little in the past: a verifier whose clock lags still accepts it.
_BACKDATE = datetime.timedelta(minutes=5)


def self_signed(hosts: Sequence[str], *, common_name: str = "jobrelay-api") -> tuple[bytes, bytes]:
    """A fresh key and a self-signed serving certificate for ``hosts`` (names or IPs): PEMs.

    It is its own CA (the published ``ca.crt``), so clients can pin exactly it.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(common_name)
    builder = _builder(subject, subject, key, _VALIDITY, _alternative_names(hosts))
    # A CA too, so that verifiers (OpenSSL) accept it as its own trust anchor.
    cert = (
        builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def certificate_authority(common_name: str, validity: datetime.timedelta) -> tuple[bytes, bytes]:
    """A fresh CA (certificate and key, PEMs) that signs serving certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(common_name)
    cert = (
        _builder(subject, subject, key, validity, None)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def signed_serving_certificate(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    hosts: Sequence[str],
    validity: datetime.timedelta,
    *,
    common_name: str = "jobrelay-api",
) -> tuple[bytes, bytes]:
    """A fresh key and a serving certificate for ``hosts`` signed by the CA: PEMs. It
    never outlives the CA (a verifier would refuse the chain past the CA's end)."""
    ca = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA's key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    validity = min(validity, ca.not_valid_after_utc - now)
    cert = (
        _builder(_name(common_name), ca.subject, key, validity, _alternative_names(hosts))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alternative_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    validity: datetime.timedelta,
    names: x509.SubjectAlternativeName | None,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
    )
    return builder if names is None else builder.add_extension(names, critical=False)


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def server_context(cert_pem: bytes, key_pem: bytes, client_ca_pem: str | None) -> ssl.SSLContext:
    """TLS 1.2+ serving ``cert_pem``; client certificates are asked for and, when one is
    sent, verified against ``client_ca_pem`` (the manager's client CA), as aggregated
    apiservers do. Without a client CA, certificates are not asked for (tokens only)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load_cert_chain(context, cert_pem, key_pem)
    if client_ca_pem:
        context.load_verify_locations(cadata=client_ca_pem)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def load_cert_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``context.load_cert_chain`` of PEMs in memory.

    OpenSSL reads a chain from files only. A container with a read-only root and
    no writable /tmp has no place for one, so the PEMs go into anonymous
    in-memory files (memfd, read back by their /proc/self/fd path); only where
    there is no memfd (not Linux) into a private temporary directory.
    """
    with _memory_files(cert_pem, key_pem) as paths:
        if paths is not None:
            context.load_cert_chain(*paths)
            return
    with tempfile.TemporaryDirectory(prefix="jobrelay-tls-") as directory:
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_path.write_bytes(cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as key_file:
            key_file.write(key_pem)
        context.load_cert_chain(cert_path, key_path)


@contextmanager
def _memory_files(*contents: bytes) -> Iterator[list[str] | None]:
    """A readable path per content, backed by memory only; None without memfd or /proc."""
    create = getattr(os, "memfd_create", None)
    if create is None or not os.path.isdir("/proc/self/fd"):
        yield None
        return
    descriptors: list[int] = []
    try:
        for content in contents:
            fd = create("jobrelay-tls", os.MFD_CLOEXEC)
            descriptors.append(fd)
            os.write(fd, content)
        yield [f"/proc/self/fd/{fd}" for fd in descriptors]
    finally:
        for fd in descriptors:
            os.close(fd)
