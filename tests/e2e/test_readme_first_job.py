"""The README's "Your first relayed Job" works as written: its `kubectl` lines, run as a
user types them against the local fleet's manager with the controller running, relay the
example Job to a worker and it completes there.

The namespace the README names is replaced by a fresh one (the same path, no clash with a
reused fleet). Before this test the README applied examples/hello.yaml to `default`,
which every worker already has unlabelled for the manager: the Job was held for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import uuid
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, NAMESPACES
from tests.e2e.support import ControllerProcess
from tests.kubetools import eventually, is_true

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
SECTION = "## Your first relayed Job"


def first_job_commands() -> list[list[str]]:
    """The README's `kubectl create` and `kubectl apply` lines of its first-Job section."""
    section = (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] in (["kubectl", "create"], ["kubectl", "apply"]):
            commands.append(words)
    return commands


def test_the_readme_applies_the_example_job() -> None:
    assert any(
        words[:2] == ["kubectl", "apply"] and "examples/hello.yaml" in words
        for words in first_job_commands()
    )


@pytest.fixture
async def made(clients: dict[str, ApiClient]) -> AsyncIterator[dict[str, str]]:
    """The README's namespaces, each renamed to a fresh one; deleted everywhere after."""
    renamed: dict[str, str] = {}
    yield renamed
    for name in renamed.values():
        for client in clients.values():  # jobrelay created it on a worker
            with contextlib.suppress(ApiError):
                await client.delete(NAMESPACES, name)


async def test_the_readme_first_relayed_job_completes_on_a_worker(
    controller: ControllerProcess,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    made: dict[str, str],
) -> None:
    commands = first_job_commands()
    for words in commands:
        if words[:3] == ["kubectl", "create", "namespace"]:
            made[words[3]] = f"readme-{uuid.uuid4().hex[:6]}"
    apply = next(words for words in commands if words[:2] == ["kubectl", "apply"])
    namespace = apply[apply.index("-n") + 1] if "-n" in apply else "default"
    namespace = made.get(namespace, namespace)
    env = {**os.environ, "KUBECONFIG": str(fleet.kubeconfig("manager"))}
    manager = clients["manager"]
    try:
        for words in commands:
            command = [KUBECTL, *(made.get(word, word) for word in words[1:])]
            process = await asyncio.create_subprocess_exec(
                *command, cwd=ROOT, env=env, stdout=PIPE, stderr=PIPE
            )
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
            assert process.returncode == 0, f"{shlex.join(words)}: {stderr.decode()}"

        async def completed() -> dict[str, Any] | None:
            job = await manager.get(JOBS, "hello", namespace=namespace)
            return job if is_true(job, "Complete") else None

        job = await eventually(completed, timeout=90, what="the README's Job completes")
    finally:
        if namespace not in made.values():
            with contextlib.suppress(ApiError):
                await manager.delete(JOBS, "hello", namespace=namespace)
    assert job["metadata"]["annotations"]["jobrelay.dev/cluster"] in fleet.workers
    assert job["status"]["succeeded"] == 3
