"""The e2e session's "no secret ever leaves" check: where to look, and for what.

For what: the credential material of the fleet (every bearer token of its
token files, every private key, every kubeconfig's ``*-data`` values and the
certificates and keys its paths name) and of every kubeconfig Secret that
appeared on the manager during the session (tests register broken and rotated
ones too).

Where: every controller log of the session (each ``ControllerProcess``
registers its log file in ``CONTROLLER_LOGS``), every version of every Event
on the manager (all namespaces, watched from the session's start: a test's
Events go with its namespace, so a list at the end would miss them), and every
version of every WorkerCluster and Job on the manager (their conditions'
messages).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import EVENTS, JOBS, SECRETS, WORKER_CLUSTERS
from tests.kubetools import WatchRecorder
from tests.leakscan import (
    Needles,
    ScanReport,
    Secret,
    kubeconfig_secrets,
    pem_secrets,
    scan,
    secret_object_secrets,
    token_file_secrets,
)

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

# Every controller log file of this session, in the order the processes were made.
CONTROLLER_LOGS: list[Path] = []
_SKIPPED_DIRS = frozenset({"etcd", "logs"})  # cluster data and component logs: no credentials
_FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def fleet_secrets(state_dir: Path) -> list[Secret]:
    """The credential material in a local fleet's state directory."""
    found: list[Secret] = []
    for path in _files(state_dir):
        label = str(path.relative_to(state_dir))
        if path.name == "tokens.csv":
            found.extend(token_file_secrets(path.read_text(), label))
        elif path.suffix == ".key":
            found.extend(pem_secrets(path.read_text(), label))
        elif path.suffix == ".kubeconfig":
            config = yaml.safe_load(path.read_text())
            found.extend(kubeconfig_secrets(config, label))
            for referenced in _referenced_files(config, path.parent):
                text = referenced.read_text()
                found.extend(pem_secrets(text, str(referenced)) or [Secret(label, text.strip())])
    return found


def _files(root: Path) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [name for name in subdirs if name not in _SKIPPED_DIRS]
        for name in files:
            yield Path(directory) / name


def _referenced_files(config: Any, base: Path) -> Iterator[Path]:
    for section, inner in (("users", "user"), ("clusters", "cluster")):
        for entry in (config or {}).get(section) or []:
            body = entry.get(inner) or {}
            for field in _FILE_FIELDS:
                if isinstance(body.get(field), str) and (base / body[field]).is_file():
                    yield base / body[field]


def reference_secrets() -> list[Secret]:
    """A fresh key in the fleet's format: what it shares with the fleet's is structure."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem_secrets(pem.decode(), "reference")


class LeakWatch:
    """Records what the manager shows during the session; scans it and the logs on demand."""

    def __init__(self, fleet: FleetHandle) -> None:
        self.fleet = fleet
        self.manager: ApiClient = fleet.client("manager")
        self.recorders = {
            "Event": WatchRecorder(self.manager, EVENTS),
            "WorkerCluster": WatchRecorder(self.manager, WORKER_CLUSTERS),
            "Job": WatchRecorder(self.manager, JOBS),
        }
        self.secrets = WatchRecorder(self.manager, SECRETS, namespace=DEFAULT_NAMESPACE)
        self.last: ScanReport | None = None
        self.last_counts: dict[str, int] = {}

    async def __aenter__(self) -> LeakWatch:
        for recorder in (*self.recorders.values(), self.secrets):
            await recorder.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for recorder in (*self.recorders.values(), self.secrets):
            await recorder.stop()
        await self.manager.aclose()

    def needles(self) -> Needles:
        found = fleet_secrets(self.fleet.state_dir)
        for _, secret in self.secrets.events:
            found.extend(secret_object_secrets(secret))
        return Needles.of(found, public=reference_secrets())

    def sources(self) -> Iterator[tuple[str, str]]:
        for path in dict.fromkeys(CONTROLLER_LOGS):  # once each, in order
            if path.exists():
                yield str(path), path.read_text(errors="replace")
        for kind, recorder in self.recorders.items():
            for number, (_, obj) in enumerate(recorder.events):
                meta = obj.get("metadata") or {}
                name = f"{kind} {meta.get('namespace') or ''}/{meta.get('name')} #{number}"
                yield name, json.dumps(obj)

    def scan(self) -> ScanReport:
        needles = self.needles()
        self.last = scan(self.sources(), needles)
        self.last_counts = {
            "controller logs": len(dict.fromkeys(CONTROLLER_LOGS)),
            **{f"{kind} versions": len(r.events) for kind, r in self.recorders.items()},
            "secrets": needles.secrets,
            "windows": len(needles.windows),
            "relists": sum(r.relists for r in self.recorders.values()),
        }
        return self.last

    def summary(self) -> str:
        if self.last is None:
            return "secret scan: not run"
        counts = ", ".join(f"{value} {name}" for name, value in self.last_counts.items())
        return f"secret scan of controller logs, Events, Jobs, WorkerClusters: {self.last.summary()} ({counts})"

    def describe_leaks(self) -> str:
        assert self.last is not None
        shown = "\n".join(f"  {leak.source}: {leak.secret}" for leak in self.last.leaks[:50])
        return f"credential material leaked ({len(self.last.leaks)} places):\n{shown}"
