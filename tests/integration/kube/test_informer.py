"""Informer against a real kube-apiserver: list, watch, bookmarks and 410 relists.

ConfigMaps are the guinea pig: no built-in controller writes them, so every
change seen is one the test made. The 410 tests use a custom resource made for
the test session: the apiserver's watch cache of a kind starts at the version
of its first list, which for a built-in kind on a fresh cluster is so low that
no version is "too old" yet, while a new CRD's cache starts at today's version.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS
from jobrelay.kube.streams import WatchEvent
from jobrelay.kube.watching import Change, Informer, InformerEvent, InformerOptions
from jobrelay.vocabulary.resource import Resource

pytestmark = pytest.mark.integration

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
WIDGETS = Resource("kubetest.jobrelay.dev", "v1", "widgets", "Widget", namespaced=True)
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.kubetest.jobrelay.dev"},
    "spec": {
        "group": "kubetest.jobrelay.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
# Short timeouts keep failures fast; a small page size exercises pagination.
OPTIONS = InformerOptions(page_size=2, backoff_initial=0.05, backoff_max=0.5)


def configmap(name: str, namespace: str, labels: dict[str, str] | None = None, **data: str) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"test": "yes"}},
        "data": data,
    }


def widget(name: str, namespace: str, **data: str) -> Any:
    return {
        "apiVersion": WIDGETS.api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test": "yes"}},
        "data": data,
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[InformerEvent] = []
        self._arrived = asyncio.Event()

    def __call__(self, event: InformerEvent) -> None:
        self.events.append(event)
        self._arrived.set()

    def changes(self) -> list[tuple[Change, str]]:
        return [(event.change, event.key) for event in self.events]

    async def wait_for(self, count: int, within: float = 20.0) -> None:
        async with asyncio.timeout(within):
            while len(self.events) < count:
                self._arrived.clear()
                await self._arrived.wait()


@pytest.fixture
async def manager(fleet: Any) -> AsyncIterator[ApiClient]:
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("manager"), cluster="manager") as client:
        yield client


@pytest.fixture(scope="session")
async def widgets(fleet: Any) -> Resource:
    """The Widget CRD, installed on the manager once per session."""
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("manager")) as client:
        try:
            await client.create(CRDS, WIDGET_CRD)
        except ApiError as error:
            if not error.is_already_exists:
                raise
        async with asyncio.timeout(30):
            while True:  # Established, then served (the apiserver's handler lags a little)
                try:
                    await client.list(WIDGETS, namespace="default", limit=1)
                    return WIDGETS
                except ApiError as error:
                    if not error.is_not_found:
                        raise
                await asyncio.sleep(0.1)


async def test_initial_list_populates_the_cache(manager: ApiClient, namespace: str) -> None:
    for name in ("a", "b", "c"):
        await manager.create(CONFIGMAPS, configmap(name, namespace, v=name))
    await manager.create(CONFIGMAPS, configmap("other", namespace, labels={"test": "no"}))
    seen = Recorder()
    informer = Informer(
        manager, CONFIGMAPS, namespace=namespace, label_selector="test=yes", options=OPTIONS
    )
    informer.add_handler(seen)
    async with informer:
        async with asyncio.timeout(20):
            await informer.wait_synced()
        assert sorted(informer.keys()) == [f"{namespace}/{n}" for n in ("a", "b", "c")]
        cached = informer.get(f"{namespace}/b")
        assert cached is not None
        assert cached["data"] == {"v": "b"}
        assert (cached["apiVersion"], cached["kind"]) == ("v1", "ConfigMap")
        assert sorted(seen.changes()) == [(Change.ADDED, f"{namespace}/{n}") for n in "abc"]
        assert int(informer.resource_version) > 0
    assert manager.request_counts["list"] >= 2, "3 objects in pages of 2"


async def test_adds_updates_and_deletes_reach_the_handlers(
    manager: ApiClient, namespace: str
) -> None:
    seen = Recorder()
    informer = Informer(manager, CONFIGMAPS, namespace=namespace, options=OPTIONS)
    informer.add_handler(seen)
    key = f"{namespace}/cm"
    async with informer:
        async with asyncio.timeout(20):
            await informer.wait_synced()
        before = len(seen.events)  # the namespace's kube-root-ca.crt, if already there
        created = await manager.create(CONFIGMAPS, configmap("cm", namespace, v="1"))
        await manager.patch(CONFIGMAPS, "cm", {"data": {"v": "2"}}, namespace=namespace)
        await manager.delete(CONFIGMAPS, "cm", namespace=namespace)
        await seen.wait_for(before + 3)
        mine = [event for event in seen.events if event.key == key]
        assert [event.change for event in mine] == [Change.ADDED, Change.UPDATED, Change.DELETED]
        added, updated, deleted = mine
        assert added.new is not None and added.new["metadata"]["uid"] == created["metadata"]["uid"]
        assert updated.old is not None and updated.old["data"] == {"v": "1"}
        assert updated.new is not None and updated.new["data"] == {"v": "2"}
        assert deleted.old is not None and deleted.new is None
        assert informer.get(key) is None
        # The watch's resourceVersion followed the events.
        assert informer.resource_version == deleted.old["metadata"]["resourceVersion"]


async def test_watching_from_a_too_old_resource_version_is_gone(
    manager: ApiClient, widgets: Resource
) -> None:
    """The apiserver answers a stale resourceVersion with 410, either refusing the
    watch or as an ERROR event: the informer must handle both."""
    try:
        async with (
            asyncio.timeout(20),
            manager.watch(widgets, resource_version="1", timeout_seconds=10) as events,
        ):
            first: WatchEvent | None = None
            async for event in events:
                first = event
                break
    except ApiError as error:
        assert error.is_gone, error
        return
    assert first is not None and first.type == "ERROR", first
    assert ApiError.from_status(first.object).is_gone


class _StaleFirstWatch(ApiClient):
    """Turns the first watch into one from resourceVersion 1, which the
    apiserver has long compacted away, after letting the test change the world
    while nobody watches."""

    stale_watches = 0
    before_stale_watch: Any = None

    @contextlib.asynccontextmanager
    async def watch(self, resource: Resource, **kwargs: Any) -> AsyncIterator[Any]:
        if self.stale_watches == 0:
            self.stale_watches += 1
            await self.before_stale_watch()
            kwargs["resource_version"] = "1"
        async with super().watch(resource, **kwargs) as events:
            yield events


async def test_a_410_relists_and_reports_what_changed_meanwhile(
    fleet: Any, manager: ApiClient, namespace: str, widgets: Resource
) -> None:
    for name in ("stays", "goes", "changes"):
        await manager.create(widgets, widget(name, namespace, v="1"))

    async def change_the_world() -> None:
        await manager.delete(widgets, "goes", namespace=namespace)
        await manager.patch(widgets, "changes", {"data": {"v": "2"}}, namespace=namespace)
        await manager.create(widgets, widget("new", namespace, v="1"))

    async with _StaleFirstWatch.from_kubeconfig(fleet.kubeconfig("manager")) as client:
        client.before_stale_watch = change_the_world
        seen = Recorder()
        informer = Informer(
            client, widgets, namespace=namespace, label_selector="test=yes", options=OPTIONS
        )
        informer.add_handler(seen)
        async with informer:
            await seen.wait_for(6)
            assert client.stale_watches == 1
        assert client.request_counts["list"] >= 2, "the 410 forced a relist"
    assert sorted(seen.changes()[:3]) == [
        (Change.ADDED, f"{namespace}/{n}") for n in ("changes", "goes", "stays")
    ]
    assert sorted(seen.changes()[3:]) == sorted(
        [
            (Change.ADDED, f"{namespace}/new"),
            (Change.UPDATED, f"{namespace}/changes"),
            (Change.DELETED, f"{namespace}/goes"),
        ]
    )
    assert sorted(informer.keys()) == [f"{namespace}/{n}" for n in ("changes", "new", "stays")]
    updated = next(event for event in seen.events[3:] if event.change is Change.UPDATED)
    assert updated.new is not None and updated.new["data"] == {"v": "2"}


async def test_bookmarks_advance_the_resource_version_without_events(
    manager: ApiClient, namespace: str
) -> None:
    """Nothing the informer selects changes, yet its resourceVersion follows the
    cluster's: the apiserver sends a bookmark 2 s before each watch times out."""
    seen = Recorder()
    informer = Informer(
        manager,
        CONFIGMAPS,
        namespace=namespace,
        label_selector="selects=nothing",
        options=InformerOptions(watch_timeout_seconds=5, backoff_initial=0.05),
    )
    informer.add_handler(seen)
    async with informer:
        async with asyncio.timeout(20):
            await informer.wait_synced()
        listed_at = int(informer.resource_version)
        lists_before = manager.request_counts["list"]
        # Changes the informer does not select move the cluster's resourceVersion.
        for index in range(3):
            await manager.create(CONFIGMAPS, configmap(f"unselected-{index}", namespace))
        async with asyncio.timeout(30):
            while int(informer.resource_version) <= listed_at:  # noqa: ASYNC110
                await asyncio.sleep(0.1)  # nothing to wait on but the version itself
        assert manager.request_counts["list"] == lists_before, "advanced by bookmark, not relist"
    assert seen.events == []


async def test_patch_flavours_and_status_against_the_apiserver(
    manager: ApiClient, namespace: str
) -> None:
    """The four patch content types are accepted as we encode them."""
    await manager.create(CONFIGMAPS, configmap("p", namespace, a="1"))
    patched = await manager.patch(CONFIGMAPS, "p", {"data": {"b": "2"}}, namespace=namespace)
    assert patched["data"] == {"a": "1", "b": "2"}
    patched = await manager.patch(
        CONFIGMAPS, "p", {"data": {"c": "3"}}, namespace=namespace, patch_type=PatchType.STRATEGIC
    )
    assert patched["data"] == {"a": "1", "b": "2", "c": "3"}
    patched = await manager.patch(
        CONFIGMAPS,
        "p",
        [{"op": "remove", "path": "/data/a"}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    assert patched["data"] == {"b": "2", "c": "3"}
    applied = await manager.patch(
        CONFIGMAPS,
        "p",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"d": "4"}},
        namespace=namespace,
        patch_type=PatchType.APPLY,
        field_manager="jobrelay-test",
    )
    assert applied["data"]["d"] == "4"
    managers = {entry["manager"] for entry in applied["metadata"]["managedFields"]}
    assert "jobrelay-test" in managers
