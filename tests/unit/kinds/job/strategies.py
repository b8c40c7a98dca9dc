"""Hypothesis strategies: Job shapes and the mirror histories the built-in controller writes."""

from __future__ import annotations

from hypothesis import strategies as st
from tests.unit.kinds.job.jobsim import BuiltinJobController, JobShape, SuspendStyle

from jobrelay.kinds.job import JsonObj

UNLIMITED = 2147483647  # the backoffLimit the apiserver defaults to with backoffLimitPerIndex


@st.composite
def shapes(draw: st.DrawFn) -> JobShape:
    """Any Job the built-in controller runs: NonIndexed or Indexed, with or without policies."""
    parallelism = draw(st.integers(1, 3))
    fail_job = draw(st.booleans())
    if not draw(st.booleans()):
        return JobShape(
            completions=draw(st.none() | st.integers(1, 4)),
            parallelism=parallelism,
            backoff_limit=draw(st.integers(0, 3)),
            fail_job_on_exit_42=fail_job,
        )
    completions = draw(st.integers(1, 5))
    per_index = draw(st.none() | st.integers(0, 1))
    return JobShape(
        indexed=True,
        completions=completions,
        parallelism=parallelism,
        backoff_limit=UNLIMITED if per_index is not None else draw(st.integers(0, 3)),
        backoff_limit_per_index=per_index,
        success_policy_count=draw(st.none() | st.integers(1, completions)),
        fail_job_on_exit_42=fail_job,
    )


@st.composite
def histories(
    draw: st.DrawFn, suspend_styles: tuple[SuspendStyle, ...] = ("none",)
) -> tuple[JobShape, list[JsonObj]]:
    """A Job shape and every mirror the built-in controller wrote while running it."""
    shape = draw(shapes())
    style = draw(st.sampled_from(suspend_styles))
    choices = draw(st.lists(st.integers(0, 999), min_size=10, max_size=60))
    return shape, BuiltinJobController(shape, style).run(choices)
