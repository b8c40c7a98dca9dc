"""The kubectl-style CLI against the real fleet and controller: `get` (every output format,
-n/-A/-l, -w), `describe`, `clusters`, `top`, exit codes, and `kubectl jobrelay` as a plugin.

Every command runs as a child process (``python -m jobrelay ...``, this tree's code), as a
user runs it, with the manager's kubeconfig.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from jobrelay.kube.resources import JOBS, WORKER_CLUSTERS
from tests.e2e.support import Relay
from tests.kubetools import eventually, is_true, job_manifest

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e

SRC = Path(__file__).resolve().parents[2] / "src"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


class Finished:
    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr

    def __repr__(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def environment(fleet: FleetHandle, path_prefix: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC)
    env["KUBECONFIG"] = str(fleet.kubeconfig("manager"))
    if path_prefix:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env.get('PATH', '')}"
    return env


async def run(fleet: FleetHandle, *args: str, argv0: tuple[str, ...] | None = None,
              env: Mapping[str, str] | None = None, timeout: float = 60) -> Finished:  # fmt: skip
    """``jobrelay ARGS`` (or ``argv0 ARGS``) to its end, within ``timeout`` seconds."""
    command = argv0 or (sys.executable, "-m", "jobrelay")
    process = await asyncio.create_subprocess_exec(
        *command, *args, env=dict(env or environment(fleet)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Finished(process.returncode, out.decode(), err.decode())


@pytest.fixture
async def workloads(relay: Relay) -> AsyncIterator[dict[str, str]]:
    """One Job in each state the fleet can show without faults: Complete, Running, Held
    (asks for more CPU than any node has), Suspended, Failed; by name -> state."""
    await relay.submit(job_manifest("done", annotations={"fleet.jobrelay.dev/duration": "100ms"}))
    runs = job_manifest("runs", completions=2, annotations=RUN_FOREVER)
    runs["metadata"]["labels"] = {"cli-test": "running"}
    await relay.submit(runs)
    await relay.submit(job_manifest("held", cpu="1000"))
    await relay.submit(job_manifest("paused", suspend=True))
    await relay.submit(
        job_manifest("broken", backoff_limit=0, annotations={"fleet.jobrelay.dev/outcome": "fail"})
    )
    await relay.wait("done", lambda j: is_true(j, "Complete"), what="done Complete")
    await relay.wait("broken", lambda j: is_true(j, "Failed"), what="broken Failed")
    await relay.wait("runs", lambda j: bool((j.get("status") or {}).get("ready")), what="ready")
    await relay.wait(
        "held",
        lambda j: bool((j["metadata"].get("annotations") or {}).get("jobrelay.dev/not-placed")),
        what="held with its reason",
    )
    await relay.wait("paused", lambda j: is_true(j, "Suspended"), what="Suspended")
    yield {
        "done": "Complete", "runs": "Running", "held": "Held", "paused": "Suspended",
        "broken": "Failed",
    }  # fmt: skip


async def test_get_every_format(
    relay: Relay, relay_fleet: FleetHandle, workloads: dict[str, str]
) -> None:
    ns = relay.namespace
    table = await run(relay_fleet, "get", "jobs", "-n", ns)
    assert table.code == 0, table
    header, *rows = table.stdout.splitlines()
    assert header.split() == [
        "NAMESPACE", "NAME", "KIND", "CLUSTER", "STATE", "COMPLETIONS", "AGE", "DURATION", "REASON",
    ]  # fmt: skip
    shown = {row.split()[1]: row.split() for row in rows}
    assert {name: cells[4] for name, cells in shown.items()} == workloads
    assert shown["done"][5] == "1/1" and shown["runs"][5] == "0/2"
    assert shown["done"][3] in relay.workers and shown["held"][3] == "-"
    held_row = next(row for row in rows if row.split()[1] == "held")
    assert "NeverFits" in held_row or "NotPlaced" in held_row, held_row
    broken_row = next(row for row in rows if row.split()[1] == "broken")
    assert "BackoffLimitExceeded" in broken_row

    async def json_matches() -> bool:
        printed = await run(relay_fleet, "get", "jobs", "-n", ns, "-o", "json")
        assert printed.code == 0, printed
        stored = await relay.manager.list(JOBS, namespace=ns)
        document = json.loads(printed.stdout)
        assert document["kind"] == "List" and document["apiVersion"] == "v1"
        # Equal to the apiserver's view, unless an object changed in between: then again.
        return sorted(document["items"], key=_name) == sorted(stored.items, key=_name)

    await eventually(json_matches, timeout=30, what="-o json equal to the apiserver's list")

    as_yaml = await run(relay_fleet, "get", "job", "done", "-n", ns, "-o", "yaml")
    assert as_yaml.code == 0, as_yaml
    assert yaml.safe_load(as_yaml.stdout) == await relay.manager.get(JOBS, "done", namespace=ns)

    names = await run(relay_fleet, "get", "jobs", "-n", ns, "-o", "name")
    assert sorted(names.stdout.split()) == sorted(f"job.batch/{n}" for n in workloads)

    wide = await run(relay_fleet, "get", "jobs", "-n", ns, "-o", "wide")
    assert wide.stdout.splitlines()[0].split()[-6:] == [
        "PLACEMENTS", "ACTIVE", "FAILED", "ESTIMATED", "START", "REASON",
    ]  # fmt: skip

    selected = await run(relay_fleet, "get", "-A", "-l", "cli-test=running", "-o", "name")
    assert selected.stdout.split() == ["job.batch/runs"]

    everything = await run(relay_fleet, "get", "all", "-n", ns, "-o", "name")
    assert everything.code == 0, everything

    missing = await run(relay_fleet, "get", "job", "nope", "-n", ns)
    assert missing.code == 3, missing
    assert '"nope" not found' in missing.stderr
    assert (await run(relay_fleet, "get", "pods")).code == 2


async def test_describe_both_sides_and_exit_codes(
    relay: Relay, relay_fleet: FleetHandle, workloads: dict[str, str]
) -> None:
    ns = relay.namespace
    done = await relay.get("done")
    cluster = done["metadata"]["annotations"]["jobrelay.dev/cluster"]
    described = await run(relay_fleet, "describe", "job", "done", "-n", ns)
    assert described.code == 0, described
    lines = described.stdout.splitlines()
    assert "State:            Complete" in lines
    assert f"  1. {cluster} (current)" in lines
    assert any(line.split()[:2] == ["Normal", "Dispatched"] for line in lines), described
    # The worker side: from the controller's API where this jobrelay has it, else one line.
    assert f"Worker:           {cluster}" in lines or any(
        line.startswith("worker details unavailable: ") for line in lines
    ), described

    held = await run(relay_fleet, "describe", "job", "held", "-n", ns)
    assert held.code == 0, held
    assert any(
        line.startswith("Waiting:          not placed: ") for line in held.stdout.splitlines()
    )

    missing = await run(relay_fleet, "describe", "job", "nope", "-n", ns)
    assert missing.code == 3, missing


async def test_clusters_and_top(relay: Relay, relay_fleet: FleetHandle) -> None:
    async def every_worker_connected() -> dict[str, list[str]] | None:
        table = await run(relay_fleet, "clusters")
        assert table.code == 0, table
        rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
        assert set(relay.workers) <= set(rows)
        return rows if all(rows[w][1] == "True" for w in relay.workers) else None

    # The controller is ready before it has written each worker's first status
    # (within the worker status interval): the table shows Unknown until then.
    rows = await eventually(every_worker_connected, timeout=30, what="every worker Connected")
    for worker in relay.workers:
        assert rows[worker][3].startswith("v1.35"), rows  # version

    printed = await run(relay_fleet, "clusters", "-o", "json")
    stored = await relay.manager.list(WORKER_CLUSTERS)
    assert {_uid(w) for w in json.loads(printed.stdout)["items"]} == {_uid(w) for w in stored.items}
    names = await run(relay_fleet, "clusters", "list", "-o", "name")
    assert set(names.stdout.split()) >= {f"workercluster.jobrelay.dev/{w}" for w in relay.workers}

    await relay.submit(job_manifest("busy", annotations=RUN_FOREVER))
    await relay.wait("busy", lambda j: bool((j.get("status") or {}).get("ready")), what="ready")
    top = await run(relay_fleet, "top", "--once")
    assert top.code == 0, top
    header, *rest = top.stdout.splitlines()
    assert header.split()[:2] == ["WORKER", "CONNECTED"]
    running = sum(
        int(line.split()[-1]) for line in rest if line.split()[:1] in ([w] for w in relay.workers)
    )
    assert running >= 1, top
    assert "Running" in rest[-1] and rest[-1].startswith("WORKLOADS "), top


async def test_get_watch_prints_the_changes(relay: Relay, relay_fleet: FleetHandle) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", "get", "jobs", "-n", relay.namespace, "-w",
        env=environment(relay_fleet), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    seen: list[list[str]] = []

    async def until(state: str) -> None:
        assert process.stdout is not None
        while not any(cells[1:2] == ["watched"] and cells[4] == state for cells in seen):
            line = await process.stdout.readline()
            assert line, "the watch ended"
            seen.append(line.decode().split())

    try:
        # Created suspended, and let run only once the watch has shown it: the run's
        # states come after the watch began, however long the CLI took to start.
        await relay.submit(
            job_manifest("watched", annotations={"fleet.jobrelay.dev/duration": "1s"}, suspend=True)
        )
        await asyncio.wait_for(until("Suspended"), 90)
        await relay.set_suspend("watched", False)
        await asyncio.wait_for(until("Complete"), 90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()
    rows = [cells[:6] + cells[8:] for cells in seen if cells[1:2] == ["watched"]]
    states = [cells[4] for cells in rows]
    # Changes only: never the same row (ages aside) twice in a row.
    assert all(a != b for a, b in itertools.pairwise(rows)), seen
    assert states[-1] == "Complete"
    assert "Running" in states or "Dispatched" in states, states


async def test_kubectl_runs_it_as_a_plugin(
    relay: Relay, relay_fleet: FleetHandle, tmp_path: Path
) -> None:
    """`kubectl jobrelay get`: kubectl finds `kubectl-jobrelay` on PATH (the console script
    pyproject declares; here a stand-in calling the same entry point with this tree's code)."""
    plugin = tmp_path / "kubectl-jobrelay"
    plugin.write_text(
        f"#!{sys.executable}\nfrom jobrelay.cli.main import plugin_main\nplugin_main()\n"
    )
    plugin.chmod(0o755)
    await relay.submit(job_manifest("plugged"))
    env = environment(relay_fleet, path_prefix=str(tmp_path))
    listed = await run(relay_fleet, "plugin", "list", argv0=(KUBECTL,), env=env)
    assert str(plugin) in listed.stdout, listed
    got = await run(relay_fleet, "jobrelay", "get", "jobs", "-n", relay.namespace, "-o", "name",
                    argv0=(KUBECTL,), env=env)  # fmt: skip
    assert got.code == 0, got
    assert got.stdout.split() == ["job.batch/plugged"]
    helped = await run(relay_fleet, "jobrelay", "--help", argv0=(KUBECTL,), env=env)
    assert "Usage: kubectl jobrelay" in helped.stdout, helped


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["uid"])
