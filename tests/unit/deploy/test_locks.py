"""requirements/*.lock pin what pyproject.toml asks for, with hashes, the same in both.

CI installs requirements/dev.lock and the image requirements/runtime.lock, so a
floor raised in pyproject.toml (past an advisory, say) must reach them: `make lock`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$")


def _requirements(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(text) for text in texts]


def read_lock(text: str) -> dict[str, tuple[Version, Marker | None, int]]:
    """Each pinned package: its version, its environment marker and how many hashes it has."""
    pins: dict[str, tuple[Version, Marker | None, int]] = {}
    current = ""
    for line in text.splitlines():
        stripped = line.strip()
        if match := _PIN.match(stripped):
            name, version, marker = match.groups()
            current = str(canonicalize_name(name))
            pins[current] = (Version(version), Marker(marker) if marker else None, 0)
        elif stripped.startswith("--hash=sha256:") and current:
            version, marker, hashes = pins[current]
            pins[current] = (version, marker, hashes + 1)
    return pins


def test_read_lock_reads_pins_markers_and_hashes() -> None:
    text = (
        "aiohttp==3.14.5 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via x\n"
        "colorama==0.4.6 ; sys_platform == 'win32' \\\n    --hash=sha256:cc\n"
    )
    pins = read_lock(text)
    assert pins["aiohttp"] == (Version("3.14.5"), None, 2)
    assert pins["colorama"][1] == Marker("sys_platform == 'win32'")


@pytest.mark.parametrize(
    ("lock", "extras"),
    [("runtime.lock", (None,)), ("dev.lock", (None, "dev"))],
)
def test_every_requirement_is_pinned_within_its_range_with_hashes(
    lock: str, extras: tuple[str | None, ...]
) -> None:
    pins = read_lock((ROOT / "requirements" / lock).read_text())
    for extra in extras:
        for requirement in _requirements(extra):
            name = str(canonicalize_name(requirement.name))
            assert name in pins, f"{name} is not in requirements/{lock}: run `make lock`"
            version, _, hashes = pins[name]
            assert requirement.specifier.contains(version, prereleases=True), (
                f"requirements/{lock} pins {name}=={version}, outside {requirement.specifier}: "
                "run `make lock`"
            )
            assert hashes, f"{name} has no hash in requirements/{lock}"


def test_the_two_locks_agree_on_every_shared_package() -> None:
    runtime = read_lock((ROOT / "requirements" / "runtime.lock").read_text())
    dev = read_lock((ROOT / "requirements" / "dev.lock").read_text())
    differ = {
        name: (runtime[name][0], dev[name][0])
        for name in runtime.keys() & dev.keys()
        if runtime[name][0] != dev[name][0]
    }
    assert not differ, f"CI would test other versions than the image runs: {differ}"
    assert runtime.keys() <= dev.keys()


def test_ci_and_the_image_install_from_the_locks() -> None:
    assert (
        "--require-hashes --no-deps -r requirements/dev.lock" in (ROOT / ".ci" / "run").read_text()
    )
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements/runtime.lock" in dockerfile
