"""``python -m jobrelay.localfleet.standin --kubeconfig WORKER.kubeconfig``: the stand-in
operators on one cluster until SIGTERM or SIGINT (exit 0)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from jobrelay.kube.client import ApiClient
from jobrelay.localfleet.helper_process import run_helper, until_stopped
from jobrelay.localfleet.standin.driver import StandinDriver


async def _serve(kubeconfig: Path, cluster: str | None) -> None:
    async with ApiClient.from_kubeconfig(kubeconfig, cluster=cluster) as client:
        driver = StandinDriver(client)
        async with driver:
            logging.getLogger(__name__).info(
                "stand-in ready on %s: %s", client.cluster, ", ".join(driver.informers) or "no kind"
            )
            await until_stopped([asyncio.ensure_future(driver.wait())])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobrelay.localfleet.standin",
        description="Drive the RayJobs, RayClusters, TrainJobs, PyTorchJobs and MPIJobs of "
        "one cluster through their real lifecycles (the local fleet's stand-in operators).",
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--cluster", help="the cluster's name in the log")
    args = parser.parse_args(argv)
    return run_helper("stand-in", _serve(args.kubeconfig, args.cluster))


if __name__ == "__main__":
    sys.exit(main())
