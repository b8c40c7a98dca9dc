"""``python -m bench.http_floor --kubeconfig FILE``: the CPU one HTTP request costs a bare
client, nothing of jobrelay around it.

aiohttp (jobrelay's HTTP core, kube/transport.py) over TLS to an apiserver of a running
local fleet (`jobrelay fleet up`; its ``<state>/manager.kubeconfig``): ``--requests``
GETs of one small object and as many server-side dry-run creates of a ConfigMap (a write
the apiserver answers without storing), one at a time and ``--concurrency`` at once, on
uvloop and on asyncio's loop. Prints this process's CPU (user + system) per request: the
floor under the controller's cost per request, whatever its own code does.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import click
import uvloop
import yaml

BODY = json.dumps(
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "floor-"},
     "data": {"x": "y" * 2000}}
).encode()  # fmt: skip


def _tls(kubeconfig: Path) -> tuple[str, ssl.SSLContext]:
    """The server and a TLS context from a kubeconfig of file paths (the local fleet's)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    return cluster["server"], context


async def _measure(server: str, context: ssl.SSLContext, verb: str, requests: int,
                   concurrency: int) -> tuple[float, float]:  # fmt: skip
    """(CPU µs per request, requests per second)."""
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> None:
            if verb == "GET":
                async with session.get(f"{server}/api/v1/namespaces/default") as response:
                    await response.read()
            else:
                url = f"{server}/api/v1/namespaces/default/configmaps?dryRun=All"
                headers = {"Content-Type": "application/json"}
                async with session.post(url, data=BODY, headers=headers) as response:
                    await response.read()

        await one()  # the connection made before the clock starts
        gate = asyncio.Semaphore(concurrency)

        async def gated() -> None:
            async with gate:
                await one()

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(gated() for _ in range(requests)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return 1e6 * cpu / requests, requests / wall


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--kubeconfig", required=True, type=click.Path(exists=True, path_type=Path),
              help="A local fleet's kubeconfig (certificate files, not inline data).")  # fmt: skip
@click.option("--requests", default=2000, show_default=True, type=click.IntRange(1))
@click.option("--concurrency", default=20, show_default=True, type=click.IntRange(1))
def main(kubeconfig: Path, requests: int, concurrency: int) -> None:
    server, context = _tls(kubeconfig)
    loops: dict[str, Callable[[Coroutine[Any, Any, tuple[float, float]]], tuple[float, float]]] = {
        "uvloop": uvloop.run, "asyncio": asyncio.run,
    }  # fmt: skip
    click.echo("| loop | request | at once | CPU per request (µs) | requests/s |")
    click.echo("| --- | --- | --- | --- | --- |")
    for loop, run in loops.items():
        for verb in ("GET", "POST dry-run"):
            for at_once in (1, concurrency):
                cpu, rate = run(_measure(server, context, verb, requests, at_once))
                click.echo(f"| {loop} | {verb} | {at_once} | {cpu:.0f} | {rate:.0f} |")


if __name__ == "__main__":
    main()
