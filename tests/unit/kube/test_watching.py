"""Informer against the in-memory apiserver: every path of the list+watch loop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.requesting import WatchRestart
from jobrelay.kube.watching import Change, Informer, InformerEvent, InformerOptions, object_key

FAST = InformerOptions(page_size=2, inactivity_timeout=5.0, backoff_initial=0.01, backoff_max=0.05)


class Recorder:
    def __init__(self) -> None:
        self.events: list[InformerEvent] = []
        self.arrived = asyncio.Event()

    def __call__(self, event: InformerEvent) -> None:
        self.events.append(event)
        self.arrived.set()

    def changes(self) -> list[tuple[Change, str]]:
        return [(e.change, e.key) for e in self.events]

    async def wait_for(self, count: int, within: float = 2.0) -> None:
        async with asyncio.timeout(within):
            while len(self.events) < count:
                self.arrived.clear()
                await self.arrived.wait()


async def eventually(condition: Any, within: float = 2.0) -> None:
    # The informer offers no signal for a bare resourceVersion change: poll, in tests only.
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


def test_object_key() -> None:
    assert object_key({"metadata": {"name": "a", "namespace": "ns"}}) == "ns/a"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"


async def test_initial_paginated_list_fills_the_cache_and_reaches_handlers(
    fake: Any, client: ApiClient
) -> None:
    for name in "abcde":
        fake.put(name, x=name)
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(seen)
    assert not informer.has_synced
    async with informer:
        await asyncio.wait_for(informer.wait_synced(), 2)
        assert informer.has_synced
        assert sorted(informer.keys()) == [f"default/{n}" for n in "abcde"]
        assert len(fake.requests) - len(fake.watches) == 3, "5 objects in pages of 2"
        assert seen.changes() == [(Change.ADDED, f"default/{n}") for n in "abcde"]
        cached = informer.get("default/c")
        assert cached is not None
        assert cached["kind"] == "ConfigMap", "list items look like fetched objects"
        assert informer.resource_version == str(fake.revision)
        watch = await fake.next_watch()
        assert watch.params["resourceVersion"] == informer.resource_version
        assert watch.params["allowWatchBookmarks"] == "true"
        timeout = int(watch.params["timeoutSeconds"])
        assert FAST.watch_timeout_seconds <= timeout < 2 * FAST.watch_timeout_seconds


async def test_watch_events_update_the_cache_then_call_handlers(
    fake: Any, client: ApiClient
) -> None:
    fake.put("a", v="1")
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)

    def check_cache_first(event: InformerEvent) -> None:
        # Handlers run after the cache changed.
        assert informer.get(event.key) == event.new

    informer.add_handler(check_cache_first)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        await fake.next_watch()
        fake.put("b", v="1")
        fake.put("a", v="2")
        fake.remove("b")
        await seen.wait_for(4)
    added, updated, deleted = seen.events[1:]
    assert (added.change, added.key, added.old) == (Change.ADDED, "default/b", None)
    assert updated.change is Change.UPDATED
    assert updated.old is not None and updated.old["data"] == {"v": "1"}
    assert updated.new is not None and updated.new["data"] == {"v": "2"}
    assert (deleted.change, deleted.new) == (Change.DELETED, None)
    assert deleted.obj["metadata"]["name"] == "b"
    assert informer.keys() == ["default/a"]
    assert informer.resource_version == str(fake.revision)


async def test_bookmarks_advance_the_resource_version_silently(
    fake: Any, client: ApiClient
) -> None:
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
        watch.send("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": "555"}})
        await eventually(lambda: informer.resource_version == "555")
        # When the server ends the watch, the next one resumes from the bookmark.
        watch.close()
        second = await fake.next_watch()
        assert second.params["resourceVersion"] == "555"
    assert seen.events == []
    assert len(fake.lists()) == 1, "re-arming a watch does not relist"


async def test_refused_watch_with_410_relists_and_emits_vanished_deletes(
    fake: Any, client: ApiClient
) -> None:
    fake.put("stays", v="1")
    fake.put("goes", v="1")
    fake.put("changes", v="1")
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
        # While the informer is not watching, the world moves on …
        fake.next_watch_answers.append((410, fake.status(410, "Expired", "too old")))
        watch.close()
        fake.objects.pop("default/goes")
        fake.put("changes", v="2")
        fake.put("new", v="1")
        # … and the informer catches up through a relist.
        await fake.next_watch()
        await seen.wait_for(6)
    assert len(fake.lists()) == 2
    assert seen.changes()[3:] == [
        (Change.UPDATED, "default/changes"),
        (Change.ADDED, "default/new"),
        (Change.DELETED, "default/goes"),
    ]
    assert sorted(informer.keys()) == ["default/changes", "default/new", "default/stays"]


async def test_error_event_with_410_relists(fake: Any, client: ApiClient) -> None:
    fake.put("a")
    restarts: list[WatchRestart] = []
    client.on_watch_restart = restarts.append
    informer = Informer(client, fake.RESOURCE, options=FAST)
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
        watch.send("ERROR", fake.status(410, "Expired", "too old resource version: 1 (50)"))
        second = await fake.next_watch()
        assert second.params["resourceVersion"] == str(fake.revision)
    assert len(fake.lists()) == 2
    # The metrics hook hears of it (jobrelay_watch_restarts_total).
    assert restarts == [WatchRestart(client.cluster, fake.RESOURCE.kind, "relist")]


async def test_other_error_events_rewatch_without_relisting(fake: Any, client: ApiClient) -> None:
    restarts: list[WatchRestart] = []
    client.on_watch_restart = restarts.append
    informer = Informer(client, fake.RESOURCE, options=FAST)
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
        watch.send("ERROR", fake.status(500, "InternalError", "etcd hiccup"))
        await fake.next_watch()
    assert len(fake.lists()) == 1
    assert [r.reason for r in restarts] == ["rewatch"]


async def test_unchanged_objects_are_not_reported_on_relist(fake: Any, client: ApiClient) -> None:
    fake.put("a")
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
        watch.send("ERROR", fake.status(410, "Expired"))
        await fake.next_watch()
    assert len(fake.lists()) == 2
    assert seen.changes() == [(Change.ADDED, "default/a")]


async def test_a_silent_watch_is_restarted_after_the_inactivity_timeout(
    fake: Any, client: ApiClient
) -> None:
    options = InformerOptions(inactivity_timeout=0.1, backoff_initial=0.01, backoff_max=0.01)
    informer = Informer(client, fake.RESOURCE, options=options)
    async with informer:
        await informer.wait_synced()
        first = await fake.next_watch()
        second = await fake.next_watch(within=1.0)  # nothing arrived on `first`
        assert first.closed, "the dead connection is released"
        assert second.params["resourceVersion"] == first.params["resourceVersion"]


async def test_events_keep_a_watch_alive_past_the_inactivity_timeout(
    fake: Any, client: ApiClient
) -> None:
    options = InformerOptions(inactivity_timeout=0.5, backoff_initial=0.01)
    informer = Informer(client, fake.RESOURCE, options=options)
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
        for revision in range(8):
            await asyncio.sleep(0.1)
            watch.send("BOOKMARK", {"metadata": {"resourceVersion": str(200 + revision)}})
        await asyncio.sleep(0.02)
        assert len(fake.watches) == 1


async def test_connection_errors_back_off_and_recover(
    fake: Any, client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.put("a")
    fake.next_list_answers.extend([httpx2.ConnectError("connection refused")] * 3)
    informer = Informer(client, fake.RESOURCE, options=FAST)
    with caplog.at_level(logging.DEBUG, logger="jobrelay.kube"):
        async with informer:
            await asyncio.wait_for(informer.wait_synced(), 2)
            assert informer.keys() == ["default/a"]
            watch = await fake.next_watch()
            watch.fail()  # the connection drops mid-stream
            await fake.next_watch()
    assert len(fake.lists()) == 4
    retries = [r.getMessage() for r in caplog.records if r.name == "jobrelay.kube.watching"]
    assert sum("Unreachable" in m and "relisting" in m for m in retries) == 3
    assert any("ReadError" in m and "watching again" in m for m in retries)
    # A silent apiserver is a state, not an error per retry: its client says when it
    # stops and starts answering; the informer's retries are debug lines.
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["jobrelay.kube.requesting", "jobrelay.kube.requesting"]
    assert all("does not answer" in r.getMessage() for r in warnings)


async def test_a_watch_that_closes_empty_handed_backs_off(fake: Any, client: ApiClient) -> None:
    options = InformerOptions(backoff_initial=0.05, backoff_max=0.05)
    informer = Informer(client, fake.RESOURCE, options=options)
    async with informer:
        await informer.wait_synced()
        loop = asyncio.get_running_loop()
        watch = await fake.next_watch()
        closed_at = loop.time()
        watch.close()
        await fake.next_watch()
        assert loop.time() - closed_at >= 0.02


async def test_large_objects_split_across_tiny_chunks_decode(fake: Any, client: ApiClient) -> None:
    fake.watch_chunk_size = 7
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        await fake.next_watch()
        fake.put("small", v="x")
        fake.put("big", v="x" * 300_000)
        fake.put("after", v="y")
        await seen.wait_for(3, within=10)
    big = informer.get("default/big")
    assert big is not None and len(big["data"]["v"]) == 300_000
    assert seen.changes() == [
        (Change.ADDED, "default/small"),
        (Change.ADDED, "default/big"),
        (Change.ADDED, "default/after"),
    ]


async def test_transform_slims_objects_before_caching(fake: Any, client: ApiClient) -> None:
    fake.put("a", payload="large")

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": obj["metadata"], "size": len(obj["data"]["payload"])}

    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, transform=slim, options=FAST)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        await fake.next_watch()
        fake.put("b", payload="xy")
        await seen.wait_for(2)
    assert informer.get("default/a") == {
        "metadata": fake.objects["default/a"]["metadata"],
        "size": 5,
    }
    assert seen.events[1].new == informer.get("default/b")


async def test_transform_returning_none_filters_objects_out(fake: Any, client: ApiClient) -> None:
    fake.put("mine", owner="us")
    fake.put("theirs", owner="them")

    def ours_only(obj: dict[str, Any]) -> dict[str, Any] | None:
        return obj if obj["data"]["owner"] == "us" else None

    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, transform=ours_only, options=FAST)
    informer.add_handler(seen)
    async with informer:
        await informer.wait_synced()
        assert informer.keys() == ["default/mine"]
        await fake.next_watch()
        fake.put("other", owner="them")  # never cached, never reported
        fake.put("mine", owner="them")  # stops matching: leaves the cache as a deletion
        await seen.wait_for(2)
    assert seen.changes() == [(Change.ADDED, "default/mine"), (Change.DELETED, "default/mine")]
    assert len(informer) == 0


@pytest.mark.logs_exceptions
async def test_a_failing_handler_does_not_stop_the_informer_or_other_handlers(
    fake: Any, client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: InformerEvent) -> None:
        raise RuntimeError("bug")

    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(broken)
    informer.add_handler(seen)
    with caplog.at_level(logging.ERROR):
        async with informer:
            await informer.wait_synced()
            await fake.next_watch()
            fake.put("a")
            fake.put("b")
            await seen.wait_for(2)
    assert "handler failed" in caplog.text


async def test_a_handler_added_after_sync_gets_the_cached_objects(
    fake: Any, client: ApiClient
) -> None:
    fake.put("a")
    fake.put("b")
    async with Informer(client, fake.RESOURCE, options=FAST) as informer:
        await informer.wait_synced()
        late = Recorder()
        informer.add_handler(late)
        assert sorted(late.changes()) == [(Change.ADDED, "default/a"), (Change.ADDED, "default/b")]


async def test_selectors_and_namespace_reach_the_apiserver(fake: Any, client: ApiClient) -> None:
    informer = Informer(
        client, fake.RESOURCE, namespace="team-a", label_selector="app=x", field_selector="a=b"
    )
    async with informer:
        await informer.wait_synced()
        watch = await fake.next_watch()
    assert watch.params["labelSelector"] == "app=x"
    assert watch.params["fieldSelector"] == "a=b"
    assert fake.requests[0].url.path == "/api/v1/namespaces/team-a/configmaps"
    assert informer.name == "fake/configmaps in team-a [app=x,a=b]"


async def test_stop_closes_the_watch_and_silences_handlers(fake: Any, client: ApiClient) -> None:
    seen = Recorder()
    informer = Informer(client, fake.RESOURCE, options=FAST)
    informer.add_handler(seen)
    informer.start()
    with pytest.raises(RuntimeError):
        informer.start()
    await informer.wait_synced()
    watch = await fake.next_watch()
    await informer.stop()
    await informer.stop()  # idempotent
    assert watch.closed
    fake.put("late")
    await asyncio.sleep(0.02)
    assert seen.events == []


async def test_wait_synced_fails_when_stopped_before_syncing(fake: Any, client: ApiClient) -> None:
    fake.next_list_answers.extend([httpx2.ConnectError("refused")] * 100)
    informer = Informer(client, fake.RESOURCE, options=FAST)
    with pytest.raises(RuntimeError, match="not running"):
        await informer.wait_synced()
    informer.start()
    waiting = asyncio.create_task(informer.wait_synced())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await informer.stop()
    with pytest.raises(RuntimeError, match="stopped before"):
        await asyncio.wait_for(waiting, 1)
