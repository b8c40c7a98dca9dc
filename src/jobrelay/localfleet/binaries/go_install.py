"""A tool built with ``go install`` from the Go module proxy into the cache (kwok, helm,
promtool), or named by an environment variable: one recipe, so each tool says only
what is its own."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root, replace_dir
from jobrelay.localfleet.binaries.gomodule import find_go, run_go
from jobrelay.localfleet.binaries.version_probe import checked_version, first_line


@dataclass(frozen=True)
class GoTool:
    name: str  # the binary's file name, and how messages call it
    version: str  # as shown and in the cache directory's name (kwok-v0.7.0)
    package: str  # what `go install` builds: module/cmd/x@version
    explicit_env: str  # the variable naming a binary of one's own instead
    version_argument: str = "--version"
    reports: str = ""  # what its version output must contain (default: its name)
    ldflags: str = "-s -w"
    duration: str = "a few minutes"

    @property
    def directory(self) -> Path:
        return cache_root() / "bin" / f"{self.name}-{self.version}"


def go_installed(tool: GoTool, progress: Progress, *, build: bool) -> Path:
    """``tool``'s binary: the one its variable names (checked), else the cached build,
    built now when missing and ``build``."""
    explicit = os.environ.get(tool.explicit_env)
    if explicit:
        binary = Path(explicit)
        hint = (
            f"{tool.explicit_env}={explicit}: point it at a {tool.name} {tool.version} "
            "binary, or unset it to use jobrelay's own build"
        )
        reported = checked_version(binary, hint=hint, argument=tool.version_argument)
        if (tool.reports or tool.name) not in reported:
            raise BinaryError(f"{binary} reports {first_line(reported)}, not {tool.name} ({hint})")
        return binary
    directory = tool.directory
    binary = directory / tool.name
    if binary.exists():
        return binary
    if not build:
        raise BinaryError(
            f"{tool.name} {tool.version} is not built yet in {directory}: run `jobrelay fleet build`"
        )
    with build_lock():
        if not binary.exists():
            go = find_go(tool.name, f"{tool.explicit_env} to a {tool.name} binary")
            progress(f"building {tool.name} {tool.version} with {go} ({tool.duration}) ...")
            directory.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f"{tool.name}-", dir=directory.parent))
            run_go(
                [go, "install", "-trimpath", f"-ldflags={tool.ldflags}", tool.package],
                cwd=staging,
                env={"GOBIN": str(staging)},
                progress=progress,
            )
            replace_dir(staging, directory)
    return binary
