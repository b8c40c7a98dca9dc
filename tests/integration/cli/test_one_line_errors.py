"""No traceback ever reaches a user: the real `jobrelay` entry point, run as a child
process over every verb that talks to the manager, with each kind of bad input, prints ONE
line on stderr (what is wrong, what to do), nothing else, and exits non-zero.

No fleet is needed (a refused connection is a port bound and never listened on), but the
~110 child processes take a minute: hence integration, not unit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

SRC = Path(__file__).resolve().parents[3] / "src"
pytestmark = pytest.mark.integration

VERBS = {
    "get": ["get"],
    "jobs": ["jobs", "-A"],
    "get-name": ["get", "job/x"],
    "describe": ["describe", "job", "x"],
    "top": ["top"],
    "logs": ["logs", "x"],
    "version": ["version"],
    "queues": ["queues"],
    "install": ["install"],
    "run": ["run", "--metrics-address", "", "--no-leader-elect"],
    "clusters": ["clusters"],
    "clusters-list": ["clusters", "list"],
    "cordon": ["clusters", "cordon", "w"],
    "uncordon": ["clusters", "uncordon", "w"],
    "drain": ["clusters", "drain", "w", "--no-wait"],
    "remove": ["clusters", "remove", "w"],
    "add": ["clusters", "add", "w", "--worker-kubeconfig", "{good}"],
}


def kubeconfig(server: str) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }  # fmt: skip


@pytest.fixture(scope="module")
def refusing_server() -> Iterator[str]:
    """A port bound and never listened on: every connection to it is refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"https://127.0.0.1:{bound.getsockname()[1]}"


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory, refusing_server: str) -> dict[str, list[str]]:
    """Each bad input: the arguments added after the verb (the kubeconfig through $KUBECONFIG
    or --kubeconfig) to reach that failure."""
    folder = tmp_path_factory.mktemp("bad")
    (folder / "empty").write_text("")
    (folder / "braces").write_text("{}\n")
    (folder / "refused").write_text(yaml.safe_dump(kubeconfig(refusing_server)))
    (folder / "a-directory").mkdir()
    return {
        "empty kubeconfig": [f"KUBECONFIG={folder / 'empty'}"],
        "{} kubeconfig": [f"KUBECONFIG={folder / 'braces'}"],
        "unreadable kubeconfig": [f"KUBECONFIG={folder / 'a-directory'}"],
        "missing kubeconfig": [f"KUBECONFIG={folder / 'nothing-here'}"],
        "missing context": [f"KUBECONFIG={folder / 'refused'}", "--context", "nope"],
        "refused connection": [f"KUBECONFIG={folder / 'refused'}"],
        "--kubeconfig empty": ["--kubeconfig", str(folder / "empty")],
    }


def run(argv: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), **environment}
    env.pop("JOBRELAY_KUBECONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "jobrelay", *argv], env=env, capture_output=True, text=True,
        timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture(scope="module")
def results(
    cases: dict[str, list[str]], refusing_server: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], subprocess.CompletedProcess[str]]:
    good = tmp_path_factory.mktemp("good") / "worker"
    good.write_text(yaml.safe_dump(kubeconfig(refusing_server)))
    jobs = {}
    for verb, argv in VERBS.items():
        for case, extra in cases.items():
            environment = dict(e.split("=", 1) for e in extra if e.startswith("KUBECONFIG="))
            flags = [e for e in extra if not e.startswith("KUBECONFIG=")]
            command = [a.replace("{good}", str(good)) for a in argv] + flags
            jobs[(verb, case)] = (command, environment)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(run, *job) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


CASES = [
    "empty kubeconfig", "{} kubeconfig", "unreadable kubeconfig", "missing kubeconfig",
    "missing context", "refused connection", "--kubeconfig empty",
]  # fmt: skip
EXPECTED = {
    "empty kubeconfig": "is empty",
    "{} kubeconfig": "is empty",
    "unreadable kubeconfig": "cannot read kubeconfig",
    "missing kubeconfig": "does not exist",
    "missing context": "context 'nope'",
    "refused connection": "(connection refused)",
    "--kubeconfig empty": "is empty",
}
# `run` is a controller: it waits for an apiserver that does not answer, as a Deployment must.
WAITS = {("run", "refused connection")}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_one_line_on_stderr_and_no_traceback(
    results: dict[tuple[str, str], subprocess.CompletedProcess[str]], verb: str, case: str
) -> None:
    if (verb, case) in WAITS:
        pytest.skip("a controller waits for its apiserver")
    finished = results[(verb, case)]
    said = f"{verb} / {case}: exit {finished.returncode}\n{finished.stderr}"
    assert "Traceback" not in finished.stderr, said
    lines = finished.stderr.splitlines()
    assert len(lines) == 1, said
    assert finished.returncode != 0, said
    assert EXPECTED[case] in lines[0], said
    if case == "refused connection":
        assert "cannot connect to https://127.0.0.1:" in lines[0], said
