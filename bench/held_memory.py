"""``python -m bench.held_memory``: what one held delegated workload costs the controller.

Pure, no fleet (issue 33): generates delegated Jobs as an apiserver sends them (labels,
annotations, a ``kubectl apply`` record of the whole object, managedFields of kubectl
and jobrelay, a pod template of several containers with env, command, volumes), each
decoded from JSON bytes like a list page, passed through the management cache's
transform (``managed_by``: the slim object the informer keeps) and kept by
``namespace/name`` as the informer does, with the queue admission's read of each (kept
per workload too). Raw objects are dropped as they go, so tracemalloc counts only what
the controller keeps per held workload. ``--bulk`` adds that many characters of env to
each pod template (a tenant's big workload). ``--templates N``: the Jobs are made from N
pod templates (their env and args), as a backlog of many Jobs from few templates is;
0 gives every Job its own. Prints the bytes per workload and the RSS.
"""

from __future__ import annotations

import gc
import json
import resource
import tracemalloc
from typing import Any

import click
import msgspec

from jobrelay.admission.workload_reads import read_for_admission
from jobrelay.controller.kind_resolution import managed_by
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.watching import object_key
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

JOB = JobKind()


def _container(index: int, name: str, bulk: int) -> dict[str, Any]:
    # ``index``: the template's (each Job's own with --templates 0).
    env = [{"name": f"SETTING_{i}", "value": f"value-{index}-{i}-" + "x" * 24} for i in range(12)]
    if bulk:
        env.append({"name": "BULK", "value": "<" * bulk})
    return {
        "name": name,
        "image": "registry.example.com/team/trainer:v1.42.0",
        "command": ["/usr/bin/python3", "-m", "trainer"],
        "args": ["--shard", str(index), "--epochs", "10", "--data", f"/data/set-{index % 7}"],
        "env": env,
        "resources": {
            "requests": {"cpu": "2", "memory": "4Gi"},
            "limits": {"cpu": "4", "memory": "8Gi"},
        },
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def job_object(index: int, bulk: int = 0, templates: int = 0) -> dict[str, Any]:
    """A delegated Job held before its first placement, as the apiserver sends it: made
    from template ``index % templates`` (its pod template's env, args and volumes), or
    from its own (``templates`` 0: every Job's pod template differs)."""
    variant = index % templates if templates else index
    name = f"train-{index:06d}"
    namespace = f"team-{index % 40}"
    applied = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "trainer"}},
        "spec": {
            "managedBy": DEFAULT_CONTROLLER_NAME,
            "completions": 4,
            "parallelism": 4,
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [_container(variant, f"worker-{c}", bulk) for c in range(2)],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                },
            },
        },
    }
    template = json.loads(json.dumps(applied["spec"]["template"]))  # type: ignore[index]
    uid = f"4b6f1c2e-{index:08d}-4e2a-9b1c-000000000000"
    # What the apiserver generates on a Job's template (without manualSelector).
    template["metadata"]["labels"].update(
        {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
         "batch.kubernetes.io/job-name": name, "job-name": name}
    )  # fmt: skip
    managed = [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "batch/v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {f"f:{k}": {f"f:{j}": {} for j in range(10)} for k in range(8)},
        }
        for manager in ("kubectl-client-side-apply", "jobrelay")
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": str(10_000 + index),
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "trainer", "jobrelay.dev/queue": f"queue-{index % 4}"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied) + "\n",
                "jobrelay.dev/not-placed": "worker-1: cpu: 8 asked, 2 free; worker-2: cpu: 8 "
                "asked, 0 free",
            },
            "managedFields": managed,
        },
        "spec": {
            **applied["spec"],  # type: ignore[dict-item]
            "template": template,
            "backoffLimit": 6,
            "completionMode": "NonIndexed",
            "suspend": False,
            "podReplacementPolicy": "TerminatingOrFailed",
            "manualSelector": False,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        },
        "status": {},
    }


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--workloads", default=20_000, show_default=True, type=click.IntRange(1))
@click.option(
    "--templates",
    default=20,
    show_default=True,
    type=click.IntRange(0),
    help="Distinct pod templates the Jobs are made from (0: each its own).",
)
@click.option("--bulk", default=0, show_default=True, type=click.IntRange(0),
              help="Characters of env added to each pod template.")  # fmt: skip
def main(workloads: int, templates: int, bulk: int) -> None:
    transform = managed_by(JOB, DEFAULT_CONTROLLER_NAME)
    sent = len(msgspec.json.encode(job_object(0, bulk, templates)))
    gc.collect()
    rss_before = _rss_mib()
    tracemalloc.start()
    cache: dict[str, dict[str, Any]] = {}
    reads: dict[WorkloadKey, Any] = {}
    for index in range(workloads):
        # As a list page arrives: fresh strings and dicts for every object.
        decoded = msgspec.json.decode(msgspec.json.encode(job_object(index, bulk, templates)))
        kept = transform(decoded)
        assert kept is not None
        key = object_key(kept)
        cache[key] = kept
        reads[WorkloadKey(JOB.name, key)] = read_for_admission(
            WorkloadKey(JOB.name, key), JOB, kept, {}
        )
        del decoded
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = _rss_mib()
    click.echo(
        f"{workloads} held Jobs of {sent} bytes as sent from {templates or workloads} pod "
        f"templates (bulk {bulk}): "
        f"{current / workloads / 1024:.1f} KiB each kept (tracemalloc), "
        f"{current / 2**20:.1f} MiB in all; RSS +{rss_after - rss_before:.1f} MiB"
    )


if __name__ == "__main__":
    main()
