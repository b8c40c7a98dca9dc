"""A release has one version (issue 35): jobrelay.__version__, which pyproject.toml reads and
both charts' version and appVersion equal; scripts/set_version.py (`make version`) sets them
together; `make image` tags the image with it, or says in one line that no container tool
is there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import jobrelay

ROOT = Path(__file__).resolve().parents[3]
CHARTS = [ROOT / "charts" / "jobrelay", ROOT / "charts" / "jobrelay-worker"]
sys.path.insert(0, str(ROOT / "scripts"))
from set_version import set_version  # noqa: E402


def test_the_package_and_both_charts_have_one_version() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jobrelay.__version__"}
    for chart in CHARTS:
        declared = yaml.safe_load((chart / "Chart.yaml").read_text())
        assert (declared["version"], declared["appVersion"]) == (
            jobrelay.__version__,
            jobrelay.__version__,
        ), chart.name


def test_the_changelog_says_which_release_the_version_is() -> None:
    """Between releases [Unreleased] says the version it will be released as; on a release
    commit the newest section is that version's (docs/release.md, "Cut a release")."""
    text = (ROOT / "CHANGELOG.md").read_text()
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## ", 1)[0]
    newest = text.split("## [Unreleased]", 1)[1].split("\n## ", 2)[1]
    version = jobrelay.__version__
    assert f"Will be released as jobrelay {version}" in unreleased or newest.startswith(
        f"[{version}] - "
    )


def test_set_version_writes_all_three_and_refuses_what_is_not_x_y_z(tmp_path: Path) -> None:
    for relative in ("src/jobrelay/__init__.py", *(f"charts/{c.name}/Chart.yaml" for c in CHARTS)):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    set_version("9.8.7", tmp_path)
    assert '__version__ = "9.8.7"' in (tmp_path / "src/jobrelay/__init__.py").read_text()
    for chart in CHARTS:
        declared = yaml.safe_load((tmp_path / "charts" / chart.name / "Chart.yaml").read_text())
        assert (declared["version"], declared["appVersion"]) == ("9.8.7", "9.8.7")
    for bad in ("1.2", "v1.2.3", "1.2.3-rc.1", "1.2.3\nx"):
        with pytest.raises(ValueError, match=r"is not X\.Y\.Z"):
            set_version(bad, tmp_path)


def _make_image(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "image"],
        env={**os.environ, **env}, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_image_builds_with_the_tool_found_and_the_one_version(tmp_path: Path) -> None:
    tool = tmp_path / "podman"
    record = tmp_path / "argv"
    tool.write_text(f'#!/bin/sh\necho "$@" > {record}\n')
    tool.chmod(0o755)
    built = _make_image(tmp_path, PATH=f"{tmp_path}:/usr/bin:/bin", CONTAINER_TOOL="")
    assert built.returncode != 0 and built.stderr.count("\n") <= 2
    assert "no container tool found: install docker, podman or buildah" in built.stderr
    built = _make_image(tmp_path, PATH=f"{tmp_path}:/usr/bin:/bin")
    if shutil.which("docker", path="/usr/bin:/bin"):
        pytest.skip("docker in /usr/bin comes first")
    assert built.returncode == 0, built.stderr
    argv = record.read_text().split()
    version = jobrelay.__version__
    assert argv[:3] == ["build", "-t", f"jobrelay:{version}"]
    assert f"VERSION={version}" in argv and argv[-3:] == ["-f", "Dockerfile", "."]
