"""`python -m build` makes the wheel and the sdist, and `pipx install` of the wheel gives
working `jobrelay` and `kubectl-jobrelay` executables (issue 22, Packaging).

The build runs without isolation (the dev lock's setuptools and wheel), from a copy of the
source tree so nothing is left in the checkout: src/ with its links into charts/ kept links
(as a clone has them), and charts/. The wheel and the sdist carry the charts' files the CLI
applies as plain files. pipx then installs the wheel with
`--no-index` from a wheelhouse holding exactly the versions of requirements/runtime.lock,
downloaded hash-checked from the configured index (pip's cache serves a second run): the
install resolves the wheel's own dependency metadata, and only the locked versions can
satisfy it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The charts' files the CLI applies or fills in, shipped in jobrelay/manifests/.
CHART_FILES = {
    "workerclusters.jobrelay.dev.yaml": "charts/jobrelay/files/crds/workerclusters.jobrelay.dev.yaml",
    "relayqueues.jobrelay.dev.yaml": "charts/jobrelay/files/crds/relayqueues.jobrelay.dev.yaml",
    "admission-policies.yaml": "charts/jobrelay/files/admission-policies.yaml",
    "worker-access.yaml": "charts/jobrelay-worker/files/worker-access.yaml",
}


def _version() -> str:
    """The release's one version: jobrelay.__version__, which pyproject.toml reads."""
    for line in (ROOT / "src" / "jobrelay" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__ = "):
            return line.removeprefix("__version__ = ").strip('"')
    raise AssertionError("src/jobrelay/__init__.py has no __version__")


def _run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src", source / "src", symlinks=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )  # fmt: skip
    shutil.copytree(ROOT / "charts", source / "charts")
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source)
    return out


def _wheel(dist: Path) -> Path:
    return dist / f"jobrelay-{_version()}-py3-none-any.whl"


def test_the_wheel_holds_the_package_data_the_license_and_no_tests(dist: Path) -> None:
    names = set(zipfile.ZipFile(_wheel(dist)).namelist())
    info = f"jobrelay-{_version()}.dist-info"
    for needed in (
        "jobrelay/py.typed",
        "jobrelay/localfleet/kwok-stages.yaml",
        "jobrelay/cli/main.py",
        f"{info}/licenses/LICENSE",
        f"{info}/entry_points.txt",
    ):
        assert needed in names, f"the wheel lacks {needed}"
    assert not [name for name in names if name.startswith(("tests/", "bench/"))]
    for name, chart_file in CHART_FILES.items():
        shipped = zipfile.ZipFile(_wheel(dist)).read(f"jobrelay/manifests/{name}")
        assert shipped == (ROOT / chart_file).read_bytes(), f"the wheel's {name}"
    metadata = zipfile.ZipFile(_wheel(dist)).read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    entry_points = zipfile.ZipFile(_wheel(dist)).read(f"{info}/entry_points.txt").decode()
    assert "jobrelay = jobrelay.cli.main:main" in entry_points
    assert "kubectl-jobrelay = jobrelay.cli.main:plugin_main" in entry_points


def test_the_sdist_holds_the_source_the_license_and_the_package_data(dist: Path) -> None:
    top = f"jobrelay-{_version()}"
    with tarfile.open(dist / f"{top}.tar.gz") as sdist:
        names = set(sdist.getnames())
    for needed in (
        "LICENSE",
        "README.md",
        "pyproject.toml",
    ):
        assert f"{top}/{needed}" in names, f"the sdist lacks {needed}"
    with tarfile.open(dist / f"{top}.tar.gz") as sdist:
        for name, chart_file in CHART_FILES.items():
            member = sdist.getmember(f"{top}/src/jobrelay/manifests/{name}")
            assert member.isfile(), f"the sdist's {name} is not a plain file"
            shipped = sdist.extractfile(member)
            assert shipped is not None and shipped.read() == (ROOT / chart_file).read_bytes()


@pytest.fixture(scope="module")
def pipx_home(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    _run(
        sys.executable, "-m", "pip", "download", "-q", "--require-hashes", "--no-deps",
        "-r", ROOT / "requirements" / "runtime.lock", "-d", wheelhouse,
    )  # fmt: skip
    home = tmp_path_factory.mktemp("pipx")
    env = _clean_env()
    env |= {
        "PIPX_HOME": str(home),
        "PIPX_BIN_DIR": str(home / "bin"),
        "PIPX_MAN_DIR": str(home / "man"),
    }
    _run(
        sys.executable, "-m", "pipx", "install", "--python", sys.executable,
        f"--pip-args=--no-index --find-links {wheelhouse}", _wheel(dist), env=env,
    )  # fmt: skip
    yield home


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH: the installed executables must run the wheel's
    code, not the checkout's."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def test_pipx_install_of_the_wheel_gives_working_executables(pipx_home: Path) -> None:
    env = _clean_env()
    pipx_bin = pipx_home / "bin"
    helped = _run(pipx_bin / "jobrelay", "--help", env=env)
    assert "dispatch Kubernetes Jobs" in helped
    assert (
        _run(pipx_bin / "jobrelay", "--version", env=env).strip()
        == f"jobrelay, version {_version()}"
    )
    if "\n  version " in helped:  # the `version` verb (issue 22's CLI part)
        assert _version() in _run(pipx_bin / "jobrelay", "version", "--client", env=env)
    assert "Usage: kubectl jobrelay" in _run(pipx_bin / "kubectl-jobrelay", "--help", env=env)
    # The chart's data shipped in the wheel is found and filled in.
    printed = _run(pipx_bin / "jobrelay", "manifests", "admission-policy", env=env)
    assert "name: jobrelay-placement" in printed and "$(" not in printed
    # They run the installed wheel, not this checkout, with every dependency it declares.
    python = pipx_home / "venvs" / "jobrelay" / "bin" / "python"
    located = _run(python, "-c", "import jobrelay; print(jobrelay.__file__)", env=env)
    assert Path(located.strip()).is_relative_to(pipx_home), located
    _run(sys.executable, "-m", "pip", "--python", python, "check", env=env)
