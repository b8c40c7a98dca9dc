"""helm, the chart's tester: built with ``go install`` from the Go module proxy (Helm 3
and Helm 4 both, as the chart supports both), or found in ``JOBRELAY_HELM_BINARY``
(Helm 3) and ``JOBRELAY_HELM4_BINARY``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root, replace_dir
from jobrelay.localfleet.binaries.gomodule import find_go, run_go
from jobrelay.localfleet.binaries.version_probe import checked_version, first_line
from jobrelay.localfleet.binaries.versions import HELM_VERSIONS

HelmMajor = Literal[3, 4]

_EXPLICIT = {3: "JOBRELAY_HELM_BINARY", 4: "JOBRELAY_HELM4_BINARY"}


def helm(progress: Progress, *, build: bool, major: HelmMajor = 3) -> Path:
    """The helm binary of ``major``, building it when missing and ``build``."""
    version = HELM_VERSIONS[major]
    explicit = os.environ.get(_EXPLICIT[major])
    if explicit:
        binary = Path(explicit)
        hint = (
            f"{_EXPLICIT[major]}={explicit}: point it at a helm v{major} binary, "
            "or unset it to use jobrelay's own build"
        )
        reported = checked_version(binary, hint=hint, argument="version")
        if f"v{major}." not in reported:
            raise BinaryError(
                f"{binary} reports {first_line(reported)}, not helm v{major} ({hint})"
            )
        return binary
    directory = cache_root() / "bin" / f"helm-{version}"
    binary = directory / "helm"
    if binary.exists():
        return binary
    if not build:
        raise BinaryError(
            f"helm {version} is not built yet in {directory}: run `jobrelay fleet build`"
        )
    with build_lock():
        if not binary.exists():
            go = find_go()
            progress(f"building helm {version} with {go} (a few minutes) ...")
            directory.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix="helm-", dir=directory.parent))
            run_go(
                [
                    go,
                    "install",
                    "-trimpath",
                    f"-ldflags=-s -w -X helm.sh/helm/v{major}/internal/version.version={version}",
                    f"helm.sh/helm/v{major}/cmd/helm@{version}",
                ],
                cwd=staging,
                env={"GOBIN": str(staging)},
                progress=progress,
            )
            replace_dir(staging, directory)
    return binary
