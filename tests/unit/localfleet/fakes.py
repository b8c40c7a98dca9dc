"""Fake fleet binaries: tiny shell scripts that answer ``--version`` as told."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

VERSIONS = {
    "kube-apiserver": "Kubernetes v1.35.4",
    "kube-controller-manager": "Kubernetes v1.35.4",
    "kube-scheduler": "Kubernetes v1.35.4",
    "etcd": "etcd Version: 3.4.23\nGit SHA: Not provided",
    "kwok": "kwok version v0.7.0 go1.26.8 (linux/amd64)",
}

FakeBinaries = Callable[..., Path]


def write_script(path: Path, version: str, *, when_run: str = "exit 1") -> Path:
    """A script printing ``version`` for --version, and doing ``when_run`` otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = --version ]; then\n  cat <<'EOF'\n{version}\nEOF\n  exit 0\nfi\n"
        f"{when_run}\n"
    )
    path.chmod(0o755)
    return path


def listen_on(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listener on ``port``, as a program squatting on the fleet's port would hold it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    # Like Go's listeners: ports of recently stopped fleets linger in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    return sock
