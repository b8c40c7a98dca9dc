"""Without jobrelay.localfleet (the container image leaves it out), `jobrelay fleet` and
`jobrelay demo` say so in one line, and every other verb still runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "jobrelay"


@pytest.fixture(scope="module")
def without_localfleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package as the image installs it: no localfleet."""
    root = tmp_path_factory.mktemp("image-site")
    shutil.copytree(
        PACKAGE, root / "jobrelay", ignore=shutil.ignore_patterns("__pycache__", "localfleet")
    )
    return root


def _jobrelay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", "from jobrelay.cli.main import main; main()", *args],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("verb", [["fleet", "status"], ["fleet", "--help"], ["demo"]])
def test_local_fleet_verbs_say_in_one_line_that_it_is_not_installed(
    without_localfleet: Path, verb: list[str]
) -> None:
    done = _jobrelay(without_localfleet, *verb)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: `jobrelay {verb[0]}` needs the local fleet (jobrelay.localfleet), which this "
        "installation leaves out (the container image does): install the jobrelay package "
        "(pip or pipx) to run it"
    ]


def test_the_copy_really_lacks_the_local_fleet_and_other_verbs_run(
    without_localfleet: Path,
) -> None:
    assert not (without_localfleet / "jobrelay" / "localfleet").exists()
    assert (without_localfleet / "jobrelay" / "cli" / "fleet.py").exists()
    for verb in (["--help"], ["run", "--help"], ["get", "--help"], ["clusters", "--help"]):
        done = _jobrelay(without_localfleet, *verb)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
