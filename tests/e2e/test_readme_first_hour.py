"""The README's first hour with the controller started as it says, a plain `jobrelay run`:
`jobrelay logs` prints a running Job's log, and the dashboard answers through
`kubectl proxy`. Nothing but the default `--api-register auto` serves and registers
the aggregated API here: the local fleet's manager is on 127.0.0.1.

Before the controller runs, the API is not registered: `jobrelay logs` says so in one
line, with what to do, and exits 1 (not `404 page not found`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import TYPE_CHECKING

import httpx2
import pytest

from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import API_SERVICES
from jobrelay.localfleet.cluster import SIMULATED_LOG
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from tests.e2e.aggregated import api_available
from tests.e2e.support import ControllerProcess, Relay
from tests.e2e.test_remote_logs import running_pods
from tests.kubetools import eventually, job_manifest

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e

# The controller as the README starts it: `jobrelay run`, no --api-* flag.
CONTROLLER_API_REGISTER = None
ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
SECTION = "## Your first relayed Job"


def readme_block() -> list[list[str]]:
    section = (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [words for line in block.splitlines() if (words := shlex.split(line, comments=True))]


# `jobrelay logs` as a tenant types it for the README's Job while it runs (the README's
# hello finishes in seconds, and a finished Job's mirror goes with it).
LOGS_COMMAND = ["jobrelay", "logs", "-n", "team-a", "hello", "--all-pods"]


def test_the_readme_starts_a_plain_controller() -> None:
    run = next(words for words in readme_block() if words[:2] == ["jobrelay", "run"])
    assert not any(word.startswith("--api") for word in run), run


async def jobrelay_logs(kubeconfig: Path, words: list[str]) -> tuple[int, str, str]:
    """``jobrelay logs ...`` as a user types it, with KUBECONFIG set as the README does."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", *words[1:], env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_before_the_controller_runs_logs_say_the_api_is_not_registered(
    relay_fleet: FleetHandle,
) -> None:
    # Runs first: no controller of this module yet. One a previous module left
    # registered (killed before it could deregister) is removed: as on a fresh fleet.
    async with relay_fleet.client("manager") as manager:
        with contextlib.suppress(ApiError):
            await manager.delete(API_SERVICES, API_SERVICE_NAME)

        async def gone() -> bool | None:
            try:
                await manager.get(API_SERVICES, API_SERVICE_NAME)
            except ApiError as error:
                if error.is_not_found:
                    return True
                raise
            return None

        await eventually(gone, timeout=30, what="no APIService")
    answers: list[tuple[int, str, str]] = []

    async def said_not_registered() -> tuple[int, str, str] | None:
        # The aggregator drops the deleted APIService's route a moment after it is gone.
        answer = await jobrelay_logs(relay_fleet.kubeconfig("manager"), LOGS_COMMAND)
        answers.append(answer)
        return answer if "not registered" in answer[2] else None

    code, out, err = await eventually(
        said_not_registered, timeout=30, what="jobrelay logs saying the API is not registered"
    )
    assert (code, out) == (1, ""), err
    (line,) = err.strip().splitlines()
    assert "not registered on this cluster" in line and "--api-register" in line
    assert "page not found" not in line


async def test_logs_of_a_running_job_with_the_readme_command(
    controller: ControllerProcess, relay: Relay, relay_fleet: FleetHandle
) -> None:
    await api_available(controller, relay_fleet)
    choice = [r for r in controller.run_records() if r.get("event") == "api-choice"]
    assert choice and "auto" in choice[-1]["msg"], choice
    await relay.submit(
        job_manifest("hello", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    worker = await relay.wait_placed("hello")
    (pod,) = await running_pods(relay, worker, "hello", 1)
    words = [relay.namespace if word == "team-a" else word for word in LOGS_COMMAND]
    code, out, err = await jobrelay_logs(relay_fleet.kubeconfig("manager"), words)
    assert code == 0, err
    name = pod["metadata"]["name"]
    assert out == "".join(f"[pod/{name}] {line}\n" for line in SIMULATED_LOG)


async def test_the_dashboard_through_kubectl_proxy(
    controller: ControllerProcess, relay_fleet: FleetHandle
) -> None:
    await api_available(controller, relay_fleet)
    env = {**os.environ, "KUBECONFIG": str(relay_fleet.kubeconfig("manager"))}
    proxy = await asyncio.create_subprocess_exec(
        KUBECTL, "proxy", "--port=0", env=env, stdout=PIPE, stderr=PIPE
    )
    try:
        assert proxy.stdout is not None
        started = await asyncio.wait_for(proxy.stdout.readline(), timeout=30)
        found = re.search(rb"127\.0\.0\.1:(\d+)", started)
        assert found, started
        url = f"http://127.0.0.1:{found[1].decode()}/apis/api.jobrelay.dev/v1alpha1/dashboard/"
        async with httpx2.AsyncClient(timeout=30, trust_env=False) as http:
            answer = await http.get(url)
        assert answer.status_code == 200, answer.text[:300]
        assert "text/html" in answer.headers.get("content-type", "")
    finally:
        proxy.terminate()
        await proxy.wait()
