"""promtool, the alert rules' tester (``promtool check rules``, ``promtool test rules``):
built with ``go install`` from the Go module proxy, or found in ``JOBRELAY_PROMTOOL_BINARY``.

Prometheus 3.x is published as Go module versions v0.3MM.P (v0.316.0 is Prometheus 3.16.0).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root, replace_dir
from jobrelay.localfleet.binaries.gomodule import find_go, run_go
from jobrelay.localfleet.binaries.version_probe import checked_version, first_line
from jobrelay.localfleet.binaries.versions import PROMTOOL_MODULE_VERSION, PROMTOOL_VERSION

_EXPLICIT = "JOBRELAY_PROMTOOL_BINARY"
_MODULE = "github.com/prometheus/prometheus"


def promtool(progress: Progress, *, build: bool) -> Path:
    """The promtool binary, building it when missing and ``build``."""
    explicit = os.environ.get(_EXPLICIT)
    if explicit:
        binary = Path(explicit)
        hint = f"{_EXPLICIT}={explicit}: point it at promtool, or unset it to use jobrelay's own"
        reported = checked_version(binary, hint=hint, argument="--version")
        if "promtool" not in reported:
            raise BinaryError(f"{binary} reports {first_line(reported)}, not promtool ({hint})")
        return binary
    directory = cache_root() / "bin" / f"promtool-{PROMTOOL_MODULE_VERSION}"
    binary = directory / "promtool"
    if binary.exists():
        return binary
    if not build:
        raise BinaryError(
            f"promtool {PROMTOOL_VERSION} is not built yet in {directory}: "
            "run `jobrelay fleet build`"
        )
    with build_lock():
        if not binary.exists():
            go = find_go("promtool", f"{_EXPLICIT} to a promtool binary")
            progress(f"building promtool {PROMTOOL_VERSION} with {go} (a few minutes) ...")
            directory.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix="promtool-", dir=directory.parent))
            version = PROMTOOL_VERSION.removeprefix("v")
            run_go(
                [
                    go,
                    "install",
                    "-trimpath",
                    f"-ldflags=-s -w -X github.com/prometheus/common/version.Version={version}",
                    f"{_MODULE}/cmd/promtool@{PROMTOOL_MODULE_VERSION}",
                ],
                cwd=staging,
                env={"GOBIN": str(staging)},
                progress=progress,
            )
            replace_dir(staging, directory)
    return binary
