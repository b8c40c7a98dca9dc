"""``python -m jobrelay.localfleet.standin --kubeconfig WORKER.kubeconfig``: the stand-in
operators on one cluster until SIGTERM or SIGINT (exit 0)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, KubeconfigError
from jobrelay.localfleet.standin.driver import StandinDriver


async def _serve(kubeconfig: Path, cluster: str | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with ApiClient.from_kubeconfig(kubeconfig, cluster=cluster) as client:
        driver = StandinDriver(client)
        async with driver:
            logging.getLogger(__name__).info(
                "stand-in ready on %s: %s", client.cluster, ", ".join(driver.informers) or "no kind"
            )
            done = asyncio.ensure_future(driver.wait())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({done, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobrelay.localfleet.standin",
        description="Drive the RayJobs, RayClusters, TrainJobs, PyTorchJobs and MPIJobs of "
        "one cluster through their real lifecycles (the local fleet's stand-in operators).",
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--cluster", help="the cluster's name in the log")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    try:
        asyncio.run(_serve(args.kubeconfig, args.cluster))
    except (ApiError, KubeconfigError, OSError) as error:
        print(f"stand-in: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
