"""kwok (simulated nodes and pods), built with ``go install``, or found in
``JOBRELAY_KWOK_BINARY``."""

from __future__ import annotations

from pathlib import Path

from jobrelay.localfleet.binaries import Progress
from jobrelay.localfleet.binaries.go_install import GoTool, go_installed
from jobrelay.localfleet.binaries.versions import KWOK_VERSION

KWOK = GoTool(
    name="kwok",
    version=KWOK_VERSION,
    package=f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
    explicit_env="JOBRELAY_KWOK_BINARY",
    reports="kwok version",
    duration="about a minute",
)


def kwok(progress: Progress, *, build: bool) -> Path:
    """The kwok binary, building it when missing and ``build``."""
    return go_installed(KWOK, progress, build=build)
