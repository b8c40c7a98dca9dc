"""etcd, from Debian's ``etcd-server`` package (3.4, which a v1.35 apiserver
accepts): it installs in seconds, where a Go build costs minutes."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.version_probe import checked_version, first_line


def etcd() -> Path:
    """``JOBRELAY_ETCD_BINARY``, else the etcd on PATH; 3.4 or newer."""
    explicit = os.environ.get("JOBRELAY_ETCD_BINARY")
    found = (
        explicit
        or shutil.which("etcd")
        or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    )
    if not found:
        raise BinaryError(
            "etcd is not installed: run `apt-get install etcd-server` "
            "(or point JOBRELAY_ETCD_BINARY at an etcd 3.4+ binary)"
        )
    binary = Path(found)
    hint = (
        f"JOBRELAY_ETCD_BINARY={explicit}: point it at an etcd 3.4+ binary, or unset it "
        "to use the etcd on PATH"
        if explicit
        else "install etcd 3.4+ with `apt-get install etcd-server`, or point "
        "JOBRELAY_ETCD_BINARY at one"
    )
    version = checked_version(binary, hint=hint)
    match = re.search(r"etcd Version: (\d+)\.(\d+)", version)
    if not match or (int(match.group(1)), int(match.group(2))) < (3, 4):
        raise BinaryError(
            f"{binary} reports {first_line(version)}, but etcd 3.4 or newer is needed ({hint})"
        )
    return binary
