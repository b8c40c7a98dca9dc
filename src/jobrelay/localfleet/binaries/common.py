"""What every component's build shares: the cache directory, its lock, staging
directories, and asking a binary for its version."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

Progress = Callable[[str], None]


class BinaryError(RuntimeError):
    """A binary is missing, of the wrong version, or could not be built."""


def cache_root() -> Path:
    explicit = os.environ.get("JOBRELAY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "jobrelay"


@contextmanager
def build_lock() -> Iterator[None]:
    """Keeps two concurrent first runs from building the same thing twice."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def replace_dir(staging: Path, directory: Path) -> None:
    # Builds land in a staging directory first, so an interrupted build never
    # leaves a half-filled cache that a later run would trust.
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists():
        shutil.rmtree(directory)
    staging.rename(directory)


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


def checked_version(binary: Path, *, hint: str) -> str:
    try:
        return version_of(binary)
    except BinaryError as error:
        raise BinaryError(f"{error} ({hint})") from error


def first_line(text: str) -> str:
    return repr(text.splitlines()[0]) if text else "nothing"
