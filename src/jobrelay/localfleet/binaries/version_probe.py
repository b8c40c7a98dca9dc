"""Asking a binary which version it is (``--version``), with messages that say why not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError


def version_of(binary: Path, flag: str = "--version") -> str:
    """What ``binary --version`` prints; BinaryError saying why when it cannot run."""
    if not binary.exists():
        raise BinaryError(f"{binary} does not exist")
    if binary.is_dir() or not os.access(binary, os.X_OK):
        raise BinaryError(f"{binary} is not an executable file")
    try:
        result = subprocess.run(
            [str(binary), flag], capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise BinaryError(f"`{binary} {flag}` did not answer within 30s") from error
    except OSError as error:
        raise BinaryError(f"{binary} cannot be run: {error}") from error
    return (result.stdout + result.stderr).strip()


def checked_version(binary: Path, *, hint: str, argument: str = "--version") -> str:
    try:
        return version_of(binary, argument)
    except BinaryError as error:
        raise BinaryError(f"{error} ({hint})") from error


def first_line(text: str) -> str:
    return repr(text.splitlines()[0]) if text else "nothing"
