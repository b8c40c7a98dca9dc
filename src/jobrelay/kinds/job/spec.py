"""Reading the Job spec fields that change how its status is judged or kept."""

from __future__ import annotations

from jobrelay.vocabulary.json_types import JsonObj


def is_suspended(job: JsonObj) -> bool:
    """Whether the Job's ``spec.suspend`` is true (absent means false)."""
    return bool((job.get("spec") or {}).get("suspend"))


def is_indexed(spec: JsonObj) -> bool:
    """Whether a Job spec asks for Indexed completion."""
    return spec.get("completionMode") == "Indexed"


def is_elastic_indexed(spec: JsonObj) -> bool:
    """An Indexed Job with ``completions == parallelism``: the one kind the apiserver lets scale.

    Its ``completions`` may change (together with ``parallelism``), and its
    ``succeeded`` counter may then drop.
    """
    completions = spec.get("completions")
    return is_indexed(spec) and completions is not None and completions == spec.get("parallelism")
