"""``python -m jobrelay.localfleet.autoscaler --kubeconfig WORKER.kubeconfig --cluster NAME``:
the stand-in autoscaler on one worker until SIGTERM or SIGINT (exit 0)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from jobrelay.kube.client import ApiClient
from jobrelay.localfleet.autoscaler.scaleup_driver import ScaleUpDriver
from jobrelay.localfleet.autoscaler.scaleup_rules import ScaleUpSettings
from jobrelay.localfleet.helper_process import run_helper, until_stopped
from jobrelay.placement.units import CPU, MEMORY, to_units
from jobrelay.vocabulary.go_durations import parse_go_duration


def _duration(text: str) -> float:
    try:
        return parse_go_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (e.g. 20s): {error}"
        ) from None


def _quantity(resource: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            if to_units(resource, text) > 0:
                return text
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"{text!r} is not a {resource} quantity above zero")

    return check


def settings_from(argv: list[str] | None = None) -> tuple[argparse.Namespace, ScaleUpSettings]:
    parser = argparse.ArgumentParser(
        prog="python -m jobrelay.localfleet.autoscaler",
        description="Serve one worker's ProvisioningRequests (autoscaling.x-k8s.io/v1) as "
        "cluster-autoscaler would, by adding KWOK nodes (the local fleet's stand-in).",
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--cluster", required=True, help="the worker's name (its nodes' label)")
    parser.add_argument("--delay", type=_duration, default=20.0, help="scale-up time (20s)")
    parser.add_argument("--max-nodes", type=int, default=4, help="nodes it may add in all")
    parser.add_argument("--cpu", type=_quantity(CPU), default="16", help="each node's CPU")
    parser.add_argument("--memory", type=_quantity(MEMORY), default="64Gi")
    parser.add_argument("--gpu", type=int, default=0, help="each node's nvidia.com/gpu")
    parser.add_argument(
        "--refuse", metavar="MESSAGE", help="refuse every request (Failed=True) with MESSAGE"
    )
    parser.add_argument(
        "--booking", type=_duration, default=None,
        help="BookingExpired when no pod consumes a provisioned request so long (default: never)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.max_nodes < 0 or args.gpu < 0:
        parser.error("--max-nodes and --gpu must be 0 or more")
    settings = ScaleUpSettings(
        delay_seconds=args.delay, max_nodes=args.max_nodes, cpu=args.cpu,
        memory=args.memory, gpu=args.gpu, refuse=args.refuse, booking_seconds=args.booking,
    )  # fmt: skip
    return args, settings


async def _serve(kubeconfig: Path, cluster: str, settings: ScaleUpSettings) -> None:
    async with (
        ApiClient.from_kubeconfig(kubeconfig, cluster=cluster) as client,
        ScaleUpDriver(client, cluster=cluster, settings=settings) as driver,
    ):
        logging.getLogger(__name__).info("stand-in autoscaler ready on %s: %s", cluster, settings)
        await until_stopped([asyncio.ensure_future(driver.wait())])


def main(argv: list[str] | None = None) -> int:
    args, settings = settings_from(argv)
    return run_helper("stand-in autoscaler", _serve(args.kubeconfig, args.cluster, settings))


if __name__ == "__main__":
    sys.exit(main())
