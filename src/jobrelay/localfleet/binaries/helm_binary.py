"""helm, the chart's tester: built with ``go install`` from the Go module proxy (Helm 3
and Helm 4 both, as the chart supports both), or found in ``JOBRELAY_HELM_BINARY``
(Helm 3) and ``JOBRELAY_HELM4_BINARY``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from jobrelay.localfleet.binaries import Progress
from jobrelay.localfleet.binaries.go_install import GoTool, go_installed
from jobrelay.localfleet.binaries.versions import HELM_VERSIONS

HelmMajor = Literal[3, 4]

_EXPLICIT = {3: "JOBRELAY_HELM_BINARY", 4: "JOBRELAY_HELM4_BINARY"}


def helm_tool(major: HelmMajor) -> GoTool:
    version = HELM_VERSIONS[major]
    return GoTool(
        name="helm",
        version=version,
        package=f"helm.sh/helm/v{major}/cmd/helm@{version}",
        explicit_env=_EXPLICIT[major],
        version_argument="version",
        reports=f"v{major}.",
        # Without it `helm version` says v{major}.0.0-unreleased... (the release Makefile sets it).
        ldflags=f"-s -w -X helm.sh/helm/v{major}/internal/version.version={version}",
    )


def helm(progress: Progress, *, build: bool, major: HelmMajor = 3) -> Path:
    """The helm binary of ``major``, building it when missing and ``build``."""
    return go_installed(helm_tool(major), progress, build=build)
