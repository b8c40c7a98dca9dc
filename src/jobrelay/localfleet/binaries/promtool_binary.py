"""promtool, the alert rules' tester (``promtool check rules``, ``promtool test rules``):
built with ``go install`` from the Go module proxy, or found in ``JOBRELAY_PROMTOOL_BINARY``.

Prometheus 3.x is published as Go module versions v0.3MM.P (v0.316.0 is Prometheus 3.16.0).
"""

from __future__ import annotations

from pathlib import Path

from jobrelay.localfleet.binaries import Progress
from jobrelay.localfleet.binaries.go_install import GoTool, go_installed
from jobrelay.localfleet.binaries.versions import PROMTOOL_MODULE_VERSION, PROMTOOL_VERSION

PROMTOOL = GoTool(
    name="promtool",
    # The cache directory is named by the module version (promtool-v0.316.0).
    version=PROMTOOL_MODULE_VERSION,
    package=f"github.com/prometheus/prometheus/cmd/promtool@{PROMTOOL_MODULE_VERSION}",
    explicit_env="JOBRELAY_PROMTOOL_BINARY",
    ldflags="-s -w -X github.com/prometheus/common/version.Version="
    + PROMTOOL_VERSION.removeprefix("v"),
)


def promtool(progress: Progress, *, build: bool) -> Path:
    """The promtool binary, building it when missing and ``build``."""
    return go_installed(PROMTOOL, progress, build=build)
