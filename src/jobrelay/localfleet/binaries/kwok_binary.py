"""kwok (simulated nodes and pods), built with ``go install``, or found in
``JOBRELAY_KWOK_BINARY``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root, replace_dir
from jobrelay.localfleet.binaries.gomodule import find_go, run_go
from jobrelay.localfleet.binaries.version_probe import checked_version, first_line
from jobrelay.localfleet.binaries.versions import KWOK_VERSION


def kwok(progress: Progress, *, build: bool) -> Path:
    """The kwok binary, building it when missing and ``build``."""
    explicit = os.environ.get("JOBRELAY_KWOK_BINARY")
    if explicit:
        binary = Path(explicit)
        hint = (
            f"JOBRELAY_KWOK_BINARY={explicit}: point it at a kwok {KWOK_VERSION} binary, "
            "or unset it to use jobrelay's own build"
        )
        version = checked_version(binary, hint=hint)
        if "kwok version" not in version:
            raise BinaryError(f"{binary} reports {first_line(version)}, not kwok ({hint})")
        return binary
    directory = cache_root() / "bin" / f"kwok-{KWOK_VERSION}"
    binary = directory / "kwok"
    if binary.exists():
        return binary
    if not build:
        raise BinaryError(f"kwok is not built yet in {directory}: run `jobrelay fleet build`")
    with build_lock():
        if not binary.exists():
            go = find_go()
            progress(f"building kwok {KWOK_VERSION} with {go} (about a minute) ...")
            directory.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix="kwok-", dir=directory.parent))
            run_go(
                [
                    go,
                    "install",
                    "-trimpath",
                    "-ldflags=-s -w",
                    f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
                ],
                cwd=staging,
                env={"GOBIN": str(staging)},
                progress=progress,
            )
            replace_dir(staging, directory)
    return binary
