"""The helper processes' shared run: an error said in one line, the end of any wait."""

from __future__ import annotations

import asyncio

import pytest

from jobrelay.kube.errors import KubeconfigError
from jobrelay.localfleet.helper_process import run_helper, until_stopped


async def _fails() -> None:
    raise KubeconfigError("no such file: /nowhere/kubeconfig")


async def _works() -> None:
    await asyncio.sleep(0)


def test_an_error_is_one_line_and_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_helper("stand-in autoscaler", _fails()) == 1
    err = capsys.readouterr().err
    assert err == "stand-in autoscaler: no such file: /nowhere/kubeconfig\n"


def test_a_clean_end_is_status_0() -> None:
    assert run_helper("stand-in", _works()) == 0


def test_the_first_wait_to_end_ends_it_and_the_others_are_cancelled() -> None:
    async def scenario() -> tuple[bool, bool]:
        ends = asyncio.ensure_future(asyncio.sleep(0))
        never = asyncio.ensure_future(asyncio.Event().wait())
        await asyncio.wait_for(until_stopped([ends, never]), timeout=5)
        await asyncio.sleep(0)
        return ends.done() and not ends.cancelled(), never.cancelled()

    assert asyncio.run(scenario()) == (True, True)
