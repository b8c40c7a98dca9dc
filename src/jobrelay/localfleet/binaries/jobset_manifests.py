"""The JobSet release's CRD, RBAC role and webhook configurations, read out of its
module zip and kept as JSON next to the controller binary."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import yaml

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.versions import JOBSET_MODULE, JOBSET_VERSION

# What the JobSet build keeps of its module next to the binary: CRD, RBAC role and
# webhook configurations, as JSON (the CRD's 800 KB of YAML parse slowly in Python).
JOBSET_MANIFESTS = "jobset-manifests.json"

# libyaml when PyYAML has it: the JobSet CRD is 800 KB of YAML.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def jobset_manifests_from_zip(archive_path: Path) -> dict[str, Any]:
    """The CRD, RBAC role and webhook configurations of the JobSet module zip.

    They are upstream's ``config/components`` as its default kustomization
    renders them (``jobset-`` name prefix, the webhook patches applied); the
    webhooks' ``clientConfig.service`` is left for the fleet to replace by a URL.
    """
    root = f"{JOBSET_MODULE}@{JOBSET_VERSION}/config/components/"
    try:
        with zipfile.ZipFile(archive_path) as archive:

            def documents(name: str) -> list[Any]:
                text = archive.read(root + name)
                return [doc for doc in yaml.load_all(text, Loader=_YAML_LOADER) if doc]

            (crd,) = documents("crd/bases/jobset.x-k8s.io_jobsets.yaml")
            (role,) = documents("rbac/role.yaml")
            configurations = {doc["kind"]: doc for doc in documents("webhook/manifests.yaml")}
            (kustomization,) = documents("webhook/kustomization.yaml")
            for patch in kustomization.get("patches") or []:
                target = configurations[patch["target"]["kind"]]
                for operation in documents("webhook/" + patch["path"])[0]:
                    _apply_json_patch(target, operation)
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile, yaml.YAMLError) as error:
        raise BinaryError(
            f"{archive_path} does not hold the JobSet manifests jobrelay expects: {error!r}"
        ) from error
    role["metadata"]["name"] = "jobset-" + role["metadata"]["name"]
    webhook_configurations = []
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = configurations[kind]
        configuration["metadata"]["name"] = "jobset-" + configuration["metadata"]["name"]
        webhook_configurations.append(configuration)
    return {
        "version": JOBSET_VERSION,
        "crd": crd,
        "clusterRole": role,
        "webhookConfigurations": webhook_configurations,
    }


def _apply_json_patch(document: Any, operation: dict[str, Any]) -> None:
    """One RFC 6902 ``add``, ``replace`` or ``remove`` (what kustomize patches use here)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in operation["path"].split("/")[1:]]
    for part in parts[:-1]:
        document = document[int(part)] if isinstance(document, list) else document[part]
    last, op = parts[-1], operation["op"]
    if isinstance(document, list):
        index = len(document) if last == "-" else int(last)
        if op == "add":
            document.insert(index, operation["value"])
        elif op == "replace":
            document[index] = operation["value"]
        elif op == "remove":
            del document[index]
        else:
            raise ValueError(f"unsupported patch operation {op!r}")
    elif op in ("add", "replace"):
        document[last] = operation["value"]
    elif op == "remove":
        del document[last]
    else:
        raise ValueError(f"unsupported patch operation {op!r}")


def write_jobset_manifests(archive_path: Path, destination: Path) -> None:
    manifests = jobset_manifests_from_zip(archive_path)
    temporary = destination.with_suffix(".tmp")
    temporary.write_text(json.dumps(manifests, separators=(",", ":")))
    temporary.replace(destination)
