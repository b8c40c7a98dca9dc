"""Set the one version of a jobrelay release everywhere it is written: the package's
``__version__`` (pyproject.toml reads it) and both charts' ``version`` and ``appVersion``.

    python3 scripts/set_version.py 0.4.0      (or: make version VERSION=0.4.0)

Then add the version's section to CHANGELOG.md (docs/release.md, "Cut a release").
tests/unit/deploy/test_versions.py checks that the files agree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path("src/jobrelay/__init__.py")
CHARTS = (Path("charts/jobrelay/Chart.yaml"), Path("charts/jobrelay-worker/Chart.yaml"))
# X.Y.Z: valid SemVer (the charts) and PEP 440 (the package) alike, and the image tag.
RELEASE = re.compile(r"\d+\.\d+\.\d+")


def set_version(version: str, root: Path = ROOT) -> list[Path]:
    """Write ``version`` into the package and both charts under ``root``; the files changed."""
    if not RELEASE.fullmatch(version):
        raise ValueError(f"{version!r} is not X.Y.Z (e.g. 0.4.0)")
    edits = [
        (PACKAGE, r'(?m)^__version__ = "[^"]*"$', f'__version__ = "{version}"'),
        *((chart, r"(?m)^version: .*$", f"version: {version}") for chart in CHARTS),
        *((chart, r"(?m)^appVersion: .*$", f'appVersion: "{version}"') for chart in CHARTS),
    ]
    changed = []
    for relative, pattern, replacement in edits:
        path = root / relative
        text = path.read_text()
        updated, count = re.subn(pattern, replacement, text)
        if count != 1:
            raise ValueError(f"{relative}: expected one line matching {pattern}, found {count}")
        if updated != text:
            path.write_text(updated)
            changed.append(relative)
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        for path in dict.fromkeys(set_version(sys.argv[1])):
            print(f"set {sys.argv[1]} in {path}")
    except ValueError as error:
        sys.exit(f"error: {error}")
