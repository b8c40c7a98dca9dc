"""Finding credential material in text: the "no secret ever leaves" scan (tests only).

Pure functions: what counts as a secret is derived from texts the caller read
(token files, PEM files, kubeconfigs, Secrets), and the scan looks for it in
texts the caller collected (controller logs, Events, statuses). A leak may be
cut short or wrapped, so every ``WINDOW``-character stretch of a secret is
looked for, not only the whole value; a report names the secret by where it
came from, never by its value.

Only stretches made of base64 / token characters can match (every secret here
is written in that alphabet), so the text is first cut into such runs and only
those are compared: a scan of megabytes of logs stays fast.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

WINDOW = 24  # long enough to never occur by chance, short enough to catch a truncated secret
_RUN = re.compile(rf"[A-Za-z0-9+/=_-]{{{WINDOW},}}")
_PEM_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]+)-----\s*(?P<body>[A-Za-z0-9+/=\s]+?)\s*-----END \1-----"
)
_PEM_HEADER = re.compile(rb"^-----BEGIN [A-Z0-9 ]+-----\r?\n")
_PEM_FOOTER = re.compile(rb"-----END [A-Z0-9 ]+-----\s*$")


@dataclass(frozen=True)
class Secret:
    """A value that must never be seen; ``label`` says where it came from."""

    label: str
    value: str


@dataclass(frozen=True)
class Leak:
    source: str  # e.g. "controller.log:12" or "Event ns/name"
    secret: str  # the secret's label, never its value


@dataclass
class Needles:
    """Every WINDOW-long stretch of every secret, mapped to the secret's label.

    A stretch that two different secrets share (e.g. the ASN.1 prefix every P-256
    key starts with, the issuer every certificate of one CA names) or that a
    ``public`` secret holds (the same forms of a freshly made key, say) is structure, not secret: it is left out, or any key
    would match any other.
    """

    windows: dict[str, str] = field(default_factory=dict)
    secrets: int = 0
    too_short: int = 0  # values shorter than WINDOW cannot be told from chance: skipped
    shared: int = 0  # stretches left out as structure

    @classmethod
    def of(cls, secrets: Iterable[Secret], public: Iterable[Secret] = ()) -> Needles:
        needles = cls()
        owners: dict[str, str] = {}  # window -> the value it was first seen in
        labels: dict[str, str] = {}
        values: dict[str, str] = {}  # distinct values, first label wins
        for secret in secrets:
            if len(secret.value) < WINDOW:
                needles.too_short += 1
            else:
                values.setdefault(secret.value, secret.label)
        structure = {window for known in public for window in _windows(known.value)}
        for value, label in values.items():
            for window in _windows(value):
                owner = owners.setdefault(window, value)
                if owner != value:
                    structure.add(window)
                labels.setdefault(window, label)
        needles.secrets = len(values)
        needles.shared = len(structure & labels.keys())
        needles.windows = {w: label for w, label in labels.items() if w not in structure}
        return needles


def _windows(text: str) -> Iterator[str]:
    for start in range(len(text) - WINDOW + 1):
        yield text[start : start + WINDOW]


@dataclass
class ScanReport:
    sources: int = 0
    bytes: int = 0
    lines: int = 0
    leaks: list[Leak] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.sources} sources, {self.bytes} bytes, {self.lines} lines scanned: "
            f"{len(self.leaks)} leaks"
        )


def scan(sources: Iterable[tuple[str, str]], needles: Needles) -> ScanReport:
    """Every place in ``sources`` ((name, text) pairs) where a stretch of a secret occurs.

    One leak is reported per (line, secret), with the line number in the source.
    """
    report = ScanReport()
    for name, text in sources:
        report.sources += 1
        report.bytes += len(text.encode("utf-8", "replace"))
        report.lines += text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        seen: set[tuple[int, str]] = set()
        for run in _RUN.finditer(text):
            found = _first_window(run.group(), needles)
            if found is None:
                continue
            line = text.count("\n", 0, run.start()) + 1
            if (line, found) not in seen:
                seen.add((line, found))
                report.leaks.append(Leak(f"{name}:{line}", found))
    return report


def _first_window(run: str, needles: Needles) -> str | None:
    for start in range(len(run) - WINDOW + 1):
        label = needles.windows.get(run[start : start + WINDOW])
        if label is not None:
            return label
    return None


# -- what the secrets are ------------------------------------------------------


def pem_secrets(text: str, label: str) -> list[Secret]:
    """The base64 body of each PEM block in ``text``, and the ``*-data`` form of the
    whole text (its base64, as a kubeconfig inlines a file)."""
    found = [
        Secret(f"{label} ({match.group(1).lower()} body)", re.sub(r"\s+", "", match["body"]))
        for match in _PEM_BLOCK.finditer(text)
    ]
    if found:
        encoded = base64.b64encode(text.encode()).decode()
        found.append(Secret(f"{label} (as *-data)", data_core(encoded)))
    return found


def data_core(value: str) -> str:
    """The part of a base64 ``*-data`` value that encodes the PEM body.

    A PEM file's BEGIN and END lines are the same in every file of a type, so
    their base64 would match any other file: only the characters that encode
    nothing but the body are kept.
    """
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    header, footer = _PEM_HEADER.search(raw), _PEM_FOOTER.search(raw)
    if header is None or footer is None:
        return value
    start = -(-header.end() // 3) * 4  # the first base64 quantum after the header
    end = (footer.start() // 3) * 4  # the last one wholly before the footer
    return value[start:end]


def token_file_secrets(text: str, label: str) -> list[Secret]:
    """The tokens of an apiserver ``--token-auth-file`` (``token,user,uid,groups`` lines)."""
    return [
        Secret(f"{label} (token of {row[1]})", row[0].strip())
        for row in csv.reader(io.StringIO(text))
        if len(row) >= 2 and row[0].strip()
    ]


def kubeconfig_secrets(config: Any, label: str) -> list[Secret]:
    """Tokens, passwords and every ``*-data`` value of a kubeconfig (and the PEM inside)."""
    found: list[Secret] = []
    for entry, value in _kubeconfig_values(config):
        where = f"{label} {entry}"
        if entry.endswith("-data"):
            found.append(Secret(where, data_core(value)))
            try:
                decoded = base64.b64decode(value, validate=True).decode()
            except (binascii.Error, ValueError):
                continue
            found.extend(
                secret for secret in pem_secrets(decoded, where) if "*-data" not in secret.label
            )
        else:
            found.append(Secret(where, value))
    return found


def _kubeconfig_values(config: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(config, Mapping):
        return
    for section, inner in (("users", "user"), ("clusters", "cluster")):
        entries = config.get(section)
        for entry in entries if isinstance(entries, list) else ():
            body = entry.get(inner) if isinstance(entry, Mapping) else None
            if not isinstance(body, Mapping):
                continue
            for key, value in body.items():
                secret_field = key in ("token", "password") or str(key).endswith("-data")
                if secret_field and isinstance(value, str):
                    yield f"{section}[{entry.get('name')}].{key}", value


def secret_object_secrets(secret: Mapping[str, Any]) -> list[Secret]:
    """A Kubernetes Secret's data values as stored, and the kubeconfig material inside."""
    meta = secret.get("metadata") or {}
    label = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    found: list[Secret] = []
    for key, value in (secret.get("data") or {}).items():
        if not isinstance(value, str):
            continue
        found.append(Secret(f"{label} data.{key}", value))
        try:
            text = base64.b64decode(value, validate=True).decode()
            config = yaml.safe_load(text)
        except (binascii.Error, ValueError, yaml.YAMLError):
            continue
        found.extend(kubeconfig_secrets(config, f"{label} data.{key}"))
    return found
