"""Small helpers for tests that drive real apiservers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobrelay.kube.api import JOBS, ApiClient, ApiError, Resource

Obj = dict[str, Any]


def job_manifest(
    name: str,
    *,
    completions: int = 1,
    parallelism: int = 1,
    backoff_limit: int = 6,
    annotations: Mapping[str, str] | None = None,
    managed_by: str | None = None,
    cpu: str = "100m",
    **spec: Any,
) -> Obj:
    """A batch/v1 Job whose pods KWOK runs according to ``annotations``."""
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {
                    "annotations": {"fleet.jobrelay.dev/duration": "200ms", **(annotations or {})}
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                },
            },
            **spec,
        },
    }
    if managed_by:
        body["spec"]["managedBy"] = managed_by
    return body


def condition(obj: Mapping[str, Any], kind: str) -> Obj | None:
    for entry in obj.get("status", {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return bool(found and found.get("status") == "True")


def finished(obj: Mapping[str, Any]) -> bool:
    return is_true(obj, "Complete") or is_true(obj, "Failed")


async def wait_for(
    client: ApiClient,
    name: str,
    namespace: str,
    predicate: Callable[[Obj], bool],
    *,
    resource: Resource = JOBS,
    timeout: float = 60.0,
    what: str = "condition",
) -> Obj:
    """Poll until ``predicate`` holds for the object (tests only: controllers watch)."""
    deadline = time.monotonic() + timeout
    last: Obj | None = None
    while time.monotonic() < deadline:
        try:
            last = await client.get(resource, name, namespace=namespace)
        except ApiError as error:
            if not error.is_not_found:
                raise
        else:
            if predicate(last):
                return last
        await asyncio.sleep(0.2)
    raise AssertionError(
        f"{resource.kind} {namespace}/{name}: timed out waiting for {what}; last: {last}"
    )
