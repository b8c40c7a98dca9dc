"""`jobrelay get -w`: after the list, only rows that changed are printed; an expired watch lists again."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from jobrelay.cli.get import JOB_KIND, Listed, Printer, WorkloadQuery, follow
from jobrelay.kube.client import ListResult
from jobrelay.kube.errors import ApiError
from jobrelay.kube.streams import WatchEvent


class Stop(Exception):
    """Ends the test's watch (a user's Ctrl-C in real life)."""


def job(name: str, rv: int, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv),
                     "annotations": annotations, "creationTimestamp": "2026-01-02T03:00:00Z"},
        "spec": {"managedBy": "jobrelay.dev/relay"},
    }  # fmt: skip


class ScriptedClient:
    """Each watch plays one script: a list of events, or an ApiError to raise at open."""

    def __init__(self, scripts: list[list[WatchEvent] | ApiError], relist: list[dict[str, Any]]):
        self.scripts = scripts
        self.relist = relist
        self.opened_at: list[str | None] = []
        self.lists = 0

    async def list(self, *_args: Any, **_kwargs: Any) -> ListResult:
        self.lists += 1
        return ListResult(items=self.relist, resource_version="50")

    @contextlib.asynccontextmanager
    async def watch(self, *_args: Any, resource_version: str | None = None,
                    **_kwargs: Any) -> AsyncIterator[AsyncIterator[WatchEvent]]:  # fmt: skip
        self.opened_at.append(resource_version)
        if not self.scripts:
            raise Stop
        script = self.scripts.pop(0)
        if isinstance(script, ApiError):
            raise script

        async def events() -> AsyncIterator[WatchEvent]:
            for event in script:
                yield event

        yield events()


async def test_only_changed_rows_are_printed_and_a_410_lists_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    query = WorkloadQuery((JOB_KIND,), "ns", None, (), "jobrelay.dev/relay", explicit=True)
    printer = Printer(None, now=lambda: datetime(2026, 1, 2, 3, 5, tzinfo=UTC))
    listed = Listed(found=[(JOB_KIND, job("a", 10))], versions={JOB_KIND.name: "10"})
    printer.first(listed.found, single=False)
    client = ScriptedClient(
        [
            [
                WatchEvent("MODIFIED", job("a", 11)),  # only its resourceVersion changed
                WatchEvent("MODIFIED", job("a", 12, **{"jobrelay.dev/cluster": "w1"})),
                WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "20"}}),
            ],
            [],  # the apiserver ended the watch: opened again where it left off
            ApiError(410, "Expired", "too old resource version"),
        ],
        relist=[job("a", 12, **{"jobrelay.dev/cluster": "w1"}), job("b", 49)],
    )
    with pytest.raises(ExceptionGroup) as stopped:
        await follow(client, query, listed, printer)  # type: ignore[arg-type]
    assert stopped.group_contains(Stop)
    assert client.opened_at == ["10", "20", "20", "50"]
    assert client.lists == 1
    lines = [line.split()[:5] for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        ["NAMESPACE", "NAME", "KIND", "CLUSTER", "STATE"],
        ["ns", "a", "Job", "-", "Pending"],
        ["ns", "a", "Job", "w1", "Dispatched"],
        ["ns", "b", "Job", "-", "Pending"],  # new after the relist; "a" unchanged
    ]


async def test_a_watch_of_an_empty_namespace_prints_the_header_with_the_first_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    query = WorkloadQuery((JOB_KIND,), "ns", None, (), "jobrelay.dev/relay", explicit=True)
    printer = Printer(None, now=lambda: datetime(2026, 1, 2, 3, 5, tzinfo=UTC))
    listed = Listed(versions={JOB_KIND.name: "10"})
    printer.first(listed.found, single=False)
    assert capsys.readouterr().out == ""
    client = ScriptedClient([[WatchEvent("ADDED", job("a", 11))]], relist=[])
    with pytest.raises(ExceptionGroup):
        await follow(client, query, listed, printer)  # type: ignore[arg-type]
    lines = [line.split()[:5] for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        ["NAMESPACE", "NAME", "KIND", "CLUSTER", "STATE"],
        ["ns", "a", "Job", "-", "Pending"],
    ]


@pytest.mark.parametrize(("output", "printed"), [(None, 0), ("wide", 1), ("json", 1)])
def test_a_change_the_table_does_not_show_is_not_printed(
    capsys: pytest.CaptureFixture[str], output: str | None, printed: int
) -> None:
    printer = Printer(output, now=lambda: datetime(2026, 1, 2, 3, 5, tzinfo=UTC))
    placed = job("a", 10, **{"jobrelay.dev/cluster": "w1"})
    placed["status"] = {"active": 2, "startTime": "2026-01-02T03:00:00Z"}
    printer.first([(JOB_KIND, placed)], single=False)
    capsys.readouterr()
    fewer = {**placed, "status": {"active": 1, "startTime": "2026-01-02T03:00:00Z"}}
    printer.changed(JOB_KIND, fewer)  # only ACTIVE (a wide column) changed
    printer.changed(JOB_KIND, {**fewer, "metadata": {**fewer["metadata"], "resourceVersion": "12"}})
    out = capsys.readouterr().out
    assert out.count('"name": "a"' if output == "json" else "Running") == printed
