"""The Go toolchain as the builds and checks use it: finding it, running it with
progress, downloading a module, and reading the module information of a binary."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.versions import K8S_VERSION


def find_go(
    what: str = "the Kubernetes binaries",
    alternative: str = "JOBRELAY_K8S_BIN_DIR to a directory holding kube-apiserver, "
    f"kube-controller-manager and kube-scheduler {K8S_VERSION}",
) -> str:
    """The ``go`` on PATH; BinaryError saying how to do without when there is none."""
    go = shutil.which("go")
    if not go:
        raise BinaryError(
            f"Go is not installed, and {what} must be built from source: "
            "install Go 1.25+ (e.g. `apt-get install golang-go` or from go.dev), or set "
            + alternative
        )
    return go


def run_go(argv: list[str], *, cwd: Path, env: dict[str, str], progress: Progress) -> None:
    """Run a go command, turning its ``-v`` package lines into periodic progress."""
    started = time.monotonic()
    full_env = {**os.environ, "GOFLAGS": "-mod=mod", **env}
    process = subprocess.Popen(
        argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    tail: list[str] = []
    last_report = started
    for steps, line in enumerate(process.stdout, start=1):
        tail = [*tail[-30:], line.rstrip()]
        now = time.monotonic()
        if now - last_report > 15:
            progress(f"  ... {steps} packages, {now - started:.0f}s elapsed")
            last_report = now
    if process.wait() != 0:
        raise BinaryError(
            f"`{' '.join(argv)}` failed (is the Go module proxy reachable?):\n" + "\n".join(tail)
        )
    progress(f"  done in {time.monotonic() - started:.0f}s")


def download_module(go: str, module: str, version: str, cwd: Path) -> dict[str, Any]:
    """`go mod download -json module@version`: the paths of its zip, extracted tree and go.mod."""
    info = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )
    if info.returncode != 0:
        raise BinaryError(
            f"cannot download {module}@{version} (is the Go module proxy reachable?): "
            + (info.stdout + info.stderr)[-2000:]
        )
    found: dict[str, Any] = json.loads(info.stdout)
    return found


def go_directive(go_mod: str) -> str:
    """The ``go`` version a go.mod asks for (a build module of ours asks for the same)."""
    found = re.search(r"^go (\S+)", go_mod, re.M)
    return found.group(1) if found else "1.25.0"


def module_info(binary: Path) -> str | None:
    """The module information Go embeds in what it builds, as ``go version -m`` shows it
    (without its indentation): empty for anything else, None when no Go is installed
    to read it. The binary itself is never run.
    """
    go = shutil.which("go")
    if go is None:
        return None
    if not binary.is_file():  # `go version -m` of a directory walks it
        return ""
    try:
        result = subprocess.run(
            [go, "version", "-m", str(binary.absolute())],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            check=False,
            # Never a toolchain switch for a go.mod that happens to be in the current directory.
            cwd="/",
            env={**os.environ, "GOTOOLCHAIN": "local"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if result.returncode != 0:
        return ""
    # "<binary>: go1.x", then each line of the module information indented by a tab.
    _header, _, lines = result.stdout.partition("\n")
    return "".join(line.removeprefix("\t") + "\n" for line in lines.splitlines())
