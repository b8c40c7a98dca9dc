"""The dashboard in a real browser: Debian's chromium, driven by Selenium through its
chromedriver (nothing downloaded), loading the page through `kubectl proxy`.

The path is the one a user takes: kubectl proxy authenticates as the fleet's admin
and forwards to the manager's apiserver, whose aggregation layer forwards to the
controller's API. The test opens the overview, sees both workers, submits a Job
and watches it run and complete without reloading, opens it and reads its Events
from both sides and its logs. Screenshots go to ``test-artifacts/dashboard/`` (or
``$JOBRELAY_ARTIFACTS_DIR/dashboard/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobrelay.localfleet.cluster import SIMULATED_LOG, Credential
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available
from tests.e2e.support import ControllerProcess, Relay
from tests.kubetools import job_manifest

pytestmark = pytest.mark.e2e

CONTROLLER_ARGS = API_ARGS
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
ARTIFACTS = Path(os.environ.get("JOBRELAY_ARTIFACTS_DIR", "test-artifacts")) / "dashboard"
# How long the page may take to show what the controller knows (its watches push
# changes within a second; a Job's run takes seconds on KWOK).
WAIT = 90.0


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, str]:
    return await api_available(controller, relay_fleet)


@pytest.fixture
async def proxy(relay_fleet: FleetHandle, registered: dict[str, str]) -> AsyncIterator[str]:
    """`kubectl proxy` on a free port of 127.0.0.1, as the fleet's admin: its base URL."""
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "proxy", "--address=127.0.0.1", "--port=0",
        "--kubeconfig", str(relay_fleet.kubeconfig("manager", Credential.TOKEN)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found, f"kubectl proxy said: {line!r}"
        yield f"http://127.0.0.1:{found[1]}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless chromium under chromedriver, both Debian's."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1400,1000", "--no-first-run",
                     "--disable-background-networking", "--disable-extensions"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


async def until(browser: Any, check: Callable[[Any], Any], what: str) -> Any:
    """What ``check(browser)`` returns once truthy (polled; the page updates by itself)."""
    from selenium.common.exceptions import WebDriverException

    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT
    last: Exception | None = None
    while loop.time() < end:
        try:
            found = await asyncio.to_thread(check, browser)
        except WebDriverException as error:
            found, last = None, error
        if found:
            return found
        await asyncio.sleep(0.25)
    shot = ARTIFACTS / f"timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower())}.png"
    await asyncio.to_thread(browser.save_screenshot, str(shot))
    raise AssertionError(f"the dashboard did not show {what} in {WAIT:.0f} s (last error: "
                         f"{last}); screenshot {shot}")  # fmt: skip


def css(selector: str) -> Callable[[Any], list[Any]]:
    from selenium.webdriver.common.by import By

    return lambda browser: browser.find_elements(By.CSS_SELECTOR, selector)


def text_of(selector: str) -> Callable[[Any], str]:
    def read(browser: Any) -> str:
        found = css(selector)(browser)
        return str(found[0].text) if found else ""

    return read


async def shot(browser: Any, name: str) -> None:
    await asyncio.to_thread(browser.save_screenshot, str(ARTIFACTS / f"{name}.png"))


async def test_the_dashboard_shows_the_fleet_and_a_job_live_through_kubectl_proxy(
    relay: Relay, relay_fleet: FleetHandle, proxy: str, browser: Any
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = f"{proxy}/apis/api.jobrelay.dev/v1alpha1/dashboard/"
    await asyncio.to_thread(browser.get, url)
    # Set once: still there at the end means the page was never reloaded.
    await asyncio.to_thread(browser.execute_script, "window.jobrelayTestMark = 'kept';")

    for worker in relay_fleet.workers:
        await until(browser, css(f'.worker[data-worker="{worker}"]'), f"worker {worker}")

    name = "dashboard-job"
    await relay.submit(job_manifest(name, annotations={"fleet.jobrelay.dev/duration": "25s"}))
    key = f"jobs/{relay.namespace}/{name}"
    row = f'#workload-table tr[data-key="{key}"]'
    await until(browser, lambda b: text_of(f"{row} .state")(b) == "Running", "the Job Running")
    await shot(browser, "overview-running")

    # Its page: Events from the manager and from its worker, and its logs.
    link = await until(browser, css(f"{row} a"), "the Job's link")
    await asyncio.to_thread(link[0].click)
    await until(browser, lambda b: b.find_element("id", "detail").is_displayed(), "its page")
    worker = await relay.wait_placed(name)
    await until(browser, css('#events tr[data-side="manager"]'), "the manager's Events")
    await until(browser, css(f'#events tr[data-side="{worker}"]'), f"{worker}'s Events")
    await until(browser, lambda b: SIMULATED_LOG[0] in text_of("#logs")(b), "the Job's logs")
    await shot(browser, "job-running")

    # It completes, and the page says so by itself.
    await until(browser, lambda b: text_of("#detail-state")(b) == "Complete", "the Job Complete")
    await shot(browser, "job-complete")
    await asyncio.to_thread(browser.execute_script, "window.history.back();")
    await until(
        browser, lambda b: text_of(f"{row} .state")(b) == "Complete", "Complete in the table"
    )
    await shot(browser, "overview-complete")
    mark = await asyncio.to_thread(browser.execute_script, "return window.jobrelayTestMark;")
    assert mark == "kept", "the page was reloaded"
    job = await relay.wait_finished(name)
    assert job["status"].get("succeeded") == 1
