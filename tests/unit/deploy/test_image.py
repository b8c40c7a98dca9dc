"""The Dockerfile builds the image issue 22 asks for: multi-stage from the locks, the base
pinned by digest, no dev tooling and no local fleet, non-root, OCI labels. Docker cannot
pull images here, so the image is not built in CI: these checks read the Dockerfile."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from tests.unit.deploy.test_locks import read_lock

ROOT = Path(__file__).resolve().parents[3]
DIGEST = re.compile(r"^[a-z0-9./_-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$")
OCI_LABELS = {"source", "version", "licenses", "title", "description", "revision"}


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [rest for instruction, rest in self.instructions if instruction == keyword]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """The global ARGs and the stages of a Dockerfile (continuations joined, comments out)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda match: global_args[match[1]], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages and instruction == "ARG":
            key, _, value = rest.partition("=")
            global_args[key] = value
        elif stages:
            stages[-1].instructions.append((instruction, rest.strip()))
    return global_args, stages


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def stages(dockerfile: str) -> list[Stage]:
    return parse(dockerfile)[1]


def test_parse_reads_stages_args_and_continuations() -> None:
    text = "ARG B=x@sha256:aa\n# c\nFROM ${B} AS one\nRUN a \\\n  b\nFROM ${B}\nUSER 1\n"
    args, found = parse(text)
    assert args == {"B": "x@sha256:aa"}
    assert [(stage.base, stage.name) for stage in found] == [
        ("x@sha256:aa", "one"),
        ("x@sha256:aa", None),
    ]
    assert found[0].all("RUN") == ["a  b"]
    assert found[1].all("USER") == ["1"]


def test_the_image_is_multi_stage_and_every_base_is_pinned_by_digest(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    for stage in stages:
        assert DIGEST.match(stage.base), f"{stage.base} is not pinned by digest"
    assert stages[-1].base.startswith("python:3.11-slim-bookworm@sha256:")


def test_the_final_stage_copies_only_the_venv_and_runs_nothing(stages: list[Stage]) -> None:
    final = stages[-1]
    builder = stages[0].name
    assert final.all("COPY") == [f"--from={builder} /opt/jobrelay /opt/jobrelay"]
    assert not final.all("RUN") and not final.all("ADD")


def test_the_final_stage_runs_jobrelay_as_the_charts_non_root_user(stages: list[Stage]) -> None:
    final = stages[-1]
    users = final.all("USER")
    assert users, "no USER: the image would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid == "65532" and gid in ("", "65532")  # charts/jobrelay: runAsUser 65532
    assert json.loads(final.all("ENTRYPOINT")[-1]) == ["jobrelay"]
    assert "PATH=/opt/jobrelay/bin:" in " ".join(final.all("ENV"))


def test_the_final_stage_has_the_oci_labels_with_version_and_revision_from_build_args(
    stages: list[Stage],
) -> None:
    final = stages[-1]
    labels = dict(word.split("=", 1) for rest in final.all("LABEL") for word in shlex.split(rest))
    prefix = "org.opencontainers.image."
    assert {key.removeprefix(prefix) for key in labels if key.startswith(prefix)} >= OCI_LABELS
    assert labels[prefix + "version"] == "${VERSION}"
    assert labels[prefix + "revision"] == "${REVISION}"
    assert labels[prefix + "licenses"] == "Apache-2.0"
    build_args = {rest.partition("=")[0] for rest in final.all("ARG")}
    assert {"VERSION", "REVISION"} <= build_args


def test_the_builder_installs_the_runtime_lock_and_leaves_the_local_fleet_out(
    dockerfile: str, stages: list[Stage]
) -> None:
    assert "dev.lock" not in dockerfile, "the image must not install the dev tools"
    builder = " ".join(stages[0].all("RUN"))
    assert "--require-hashes --no-deps -r requirements/runtime.lock" in builder
    assert "--require-hashes --no-deps -r requirements/build.lock" in builder
    assert "python -m venv --without-pip /opt/jobrelay" in builder
    assert "rm -rf /opt/jobrelay/lib/python3.11/site-packages/jobrelay/localfleet" in builder


def test_the_build_lock_pins_the_build_backend_with_hashes_as_ci_tests_it() -> None:
    build = read_lock((ROOT / "requirements" / "build.lock").read_text())
    dev = read_lock((ROOT / "requirements" / "dev.lock").read_text())
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for text in requires:
        requirement = Requirement(text)
        name = str(canonicalize_name(requirement.name))
        version, _, hashes = build[name]
        assert requirement.specifier.contains(version) and hashes, f"{name}: run `make lock`"
        assert dev[name][0] == version, f"{name}: the image builds with another version than CI"


def test_the_build_context_is_only_what_the_dockerfile_copies(stages: list[Stage]) -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignored[ignored.index("*") :]  # everything is left out unless named again
    allowed = {line.removeprefix("!").rstrip("/") for line in ignored if line.startswith("!")}
    copied = {
        source.rstrip("/")
        for rest in stages[0].all("COPY")
        for source in rest.split()[:-1]
        if not source.startswith("--")
    }
    assert copied <= allowed, f"copied but left out of the context: {copied - allowed}"
    assert not [line for line in allowed if line.startswith(("tests", "requirements/dev"))]


def test_the_builder_copies_the_charts_the_package_links_to(stages: list[Stage]) -> None:
    """src/jobrelay/manifests/ links into charts/: without it the wheel build fails."""
    linked = {
        path.resolve().relative_to(ROOT).parts[0]
        for path in (ROOT / "src" / "jobrelay" / "manifests").iterdir()
        if path.is_symlink()
    }
    assert linked == {"charts"}
    assert "charts ./charts" in stages[0].all("COPY")
