"""``python -m jobrelay.localfleet.jobstandin --cluster NAME=KUBECONFIG ...``: the job
stand-in for every light worker named, until SIGTERM or SIGINT (exit 0)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from pathlib import Path

from jobrelay.kube.client import ApiClient
from jobrelay.localfleet.helper_process import run_helper, until_stopped
from jobrelay.localfleet.jobstandin.job_driver import JobStandinDriver


async def _serve(clusters: dict[str, Path]) -> None:
    async with contextlib.AsyncExitStack() as stack:
        drivers = []
        for name, kubeconfig in clusters.items():
            client = await stack.enter_async_context(
                ApiClient.from_kubeconfig(kubeconfig, cluster=name)
            )
            drivers.append(JobStandinDriver(client))
        await asyncio.gather(*(stack.enter_async_context(driver) for driver in drivers))
        logging.getLogger(__name__).info("job stand-in ready on %s", ", ".join(clusters))
        await until_stopped(asyncio.ensure_future(driver.wait()) for driver in drivers)


def _cluster(text: str) -> tuple[str, Path]:
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=KUBECONFIG")
    return name, Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobrelay.localfleet.jobstandin",
        description="Run the batch/v1 Jobs of light workers: pods made, placed on the "
        "workers' simulated nodes, run for their duration, Job status written as the "
        "built-in Job controller would.",
    )
    parser.add_argument("--cluster", type=_cluster, action="append", required=True,
                        metavar="NAME=KUBECONFIG")  # fmt: skip
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    return run_helper("job stand-in", _serve(dict(args.cluster)), verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
