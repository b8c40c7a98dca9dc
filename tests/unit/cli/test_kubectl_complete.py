"""`kubectl jobrelay <TAB>`: the `kubectl_complete-jobrelay` console script answers kubectl's
plugin-completion protocol (kubectl 1.26+): run with the words after `jobrelay`, the last
being the one to complete; one candidate a line, then `:DIRECTIVE`."""

from __future__ import annotations

import importlib
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.shell_completion import CompletionItem

from jobrelay.cli.kubectl_complete import answer

ROOT = Path(__file__).resolve().parents[3]
SHIM = "kubectl_complete-jobrelay"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def console_scripts() -> dict[str, str]:
    scripts: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "scripts"
    ]
    return scripts


def test_pyproject_declares_the_completion_shim() -> None:
    module, _, function = console_scripts()[SHIM].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """The console scripts as pip installs them: executables on $PATH that call the
    declared entry points (this tree's code)."""
    for name in (SHIM, "kubectl-jobrelay"):
        module, _, function = console_scripts()[name].partition(":")
        script = tmp_path / name
        script.write_text(
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT / 'src')!r})\n"
            f"from {module} import {function}\nsys.exit({function}())\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def run(argv: list[str], bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("words", "expected", "directive"),
    [
        ([""], ["clusters", "describe", "get", "version"], ":4"),
        (["cl"], ["clusters"], ":4"),
        (["clusters", "co"], ["cordon"], ":4"),
        (["clusters", "add", "w", "--worker-k"], ["--worker-kubeconfig"], ":4"),
        (["get", "-o", ""], ["json", "yaml", "wide", "name"], ":4"),
        (["clusters", "add", "w", "--worker-kubeconfig", ""], [], ":0"),  # file names
    ],
)
def test_the_shim_answers_as_kubectl_runs_it(
    bin_dir: Path, words: list[str], expected: list[str], directive: str
) -> None:
    finished = run([str(bin_dir / SHIM), *words], bin_dir)
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert lines[-1] == directive, finished.stdout
    values = [line.split("\t")[0] for line in lines[:-1]]
    assert set(expected) <= set(values), finished.stdout
    assert all(value.startswith(words[-1]) for value in values)
    assert finished.stderr == ""


def test_kubectl_itself_completes_through_the_shim(bin_dir: Path) -> None:
    """kubectl's own `__complete` (what its shell script calls on TAB) finds the plugin and
    its shim on $PATH and passes our candidates on."""
    assert Path(KUBECTL).exists(), "kubectl is needed (it is on the project's machines)"
    finished = run([KUBECTL, "__complete", "jobrelay", "clusters", "co"], bin_dir)
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines[:-1]] == ["cordon"], finished.stdout
    assert lines[-1] == ":4"


def test_candidates_are_one_line_each_and_files_are_left_to_the_shell() -> None:
    items = [CompletionItem("a", help="two\nlines\tand a tab"), CompletionItem("b")]
    assert answer(items) == ["a\ttwo lines and a tab", "b", ":4"]
    assert answer([CompletionItem("", type="file")]) == [":0"]
    assert answer([CompletionItem("", type="dir")]) == [":16"]
    assert answer([]) == [":4"]
