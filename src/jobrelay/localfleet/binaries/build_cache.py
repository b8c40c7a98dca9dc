"""The cache builds land in, outside the repo: its directory, the lock that keeps two
concurrent first runs from building twice, and the staging that keeps a half-done
build out of it."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
