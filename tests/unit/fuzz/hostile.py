"""Hostile input for the pure functions: what a user or a worker may write, and worse.

Management objects pass the manager's apiserver, so their fields have the
schema's types but any value (huge or odd annotations, names no Job may have).
Mirrors and WorkerCluster statuses come from elsewhere: any JSON at all.

Every fuzz test here is ``@FUZZ`` (a fixed seed, a deadline that only a hang or
a blow-up misses: these functions take microseconds) and ``@counted``, so the
session's terminal summary prints how many examples each one ran.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    CLUSTER_ANNOTATION,
    MIRROR_LABEL,
    MIRRORS_ANNOTATION,
    ORIGIN_UID_LABEL,
    PLACEMENTS_ANNOTATION,
    REDISPATCH_ANNOTATION,
    RUN_ANNOTATION,
)

P = ParamSpec("P")
R = TypeVar("R")

# Examples run and seconds spent, per fuzz test (printed by conftest.py).
EXAMPLES: Counter[str] = Counter()
SECONDS: dict[str, float] = defaultdict(float)


# A longer campaign: JOBRELAY_FUZZ_SCALE=50 python -m pytest tests/unit/fuzz (the summary
# prints each test's examples and seconds).
SCALE = max(1, int(os.environ.get("JOBRELAY_FUZZ_SCALE", "1") or 1))


def fuzz(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples * SCALE,
        derandomize=True,
        deadline=timedelta(seconds=2),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )


def counted(test: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        EXAMPLES[test.__name__] += 1
        started = time.perf_counter()
        try:
            return test(*args, **kwargs)
        finally:
            SECONDS[test.__name__] += time.perf_counter() - started

    return run


# -- values ---------------------------------------------------------------------

HUGE_TEXT = st.sampled_from(["x" * 20_000, "[" * 20_000, "9" * 5000, "\u202e" * 1000, "é" * 10_000])
odd_text = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=80),
    st.sampled_from(["", " ", "-", "..", "a" * 254, "\x00", "\n", "null", "[]", "{}", "0x10"]),
    HUGE_TEXT,
)
numbers = st.one_of(
    st.integers(-(2**63), 2**63),
    st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, 10**18, 10**100]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
index_text = st.one_of(
    st.sampled_from(
        [
            "5-2,x", "0-999999999", "0-99999999999999999999", "1,1", "-1", ",", "3-",
            "0-2,1-4", "2,1", "1-1", " 1", "0--1", "٣", "1" * 5000, "0-9223372036854775808",
            "0-999999999,1000000000-1999999999",
        ]
    ),
    st.lists(st.integers(0, 10**12).map(str), max_size=5).map(",".join),
    st.from_regex(r"[0-9,\-x ]{0,30}", fullmatch=True),
)  # fmt: skip
timestamps = st.one_of(
    st.sampled_from(
        ["2026-03-01T12:00:00Z", "", "yesterday", "9999-99-99T99:99:99Z", "0001-01-01T00:00:00Z",
         "2026-03-01T12:00:00+14:00", "1e9", "NaN"]
    ),
    odd_text,
)  # fmt: skip
scalars = st.one_of(st.none(), numbers, odd_text, index_text, timestamps)
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=12,
)
junk_conditions = st.lists(
    st.one_of(
        anything,
        st.fixed_dictionaries(
            {"type": st.sampled_from(["Complete", "Failed", "FailureTarget",
                                      "SuccessCriteriaMet", "Suspended", "x"])},
            optional={"status": st.sampled_from(["True", "False", "Unknown"]) | anything,
                      "reason": anything, "message": anything,
                      "lastTransitionTime": timestamps, "lastProbeTime": timestamps},
        ),
    ),
    max_size=5,
)  # fmt: skip
JOB_STATUS_FIELDS = (
    "active", "ready", "terminating", "succeeded", "failed", "startTime", "completionTime",
    "completedIndexes", "failedIndexes", "conditions", "uncountedTerminatedPods",
)  # fmt: skip


def _status_value(field: str) -> st.SearchStrategy[Any]:
    if field in ("completedIndexes", "failedIndexes"):
        return index_text | anything
    if field == "conditions":
        return junk_conditions | anything
    if field in ("startTime", "completionTime"):
        return timestamps | anything
    if field == "uncountedTerminatedPods":
        return st.dictionaries(st.sampled_from(["succeeded", "failed"]), anything) | anything
    return numbers | anything


job_statuses = st.dictionaries(st.sampled_from(JOB_STATUS_FIELDS), st.none(), max_size=8).flatmap(
    lambda keys: st.fixed_dictionaries({key: _status_value(key) for key in keys})
)
# A management Job's status: the schema's types (the manager's apiserver checks them),
# any values: counters out of range, indexes and times of any text.
int32 = st.integers(-(2**31), 2**31 - 1)
schema_conditions = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet",
                                  "Suspended", "x"]),
         "status": st.sampled_from(["True", "False", "Unknown", "", "true"])},
        optional={"reason": odd_text, "message": odd_text, "lastTransitionTime": timestamps},
    ),
    max_size=4,
)  # fmt: skip
management_statuses = st.fixed_dictionaries(
    {},
    optional={
        **{field: int32 for field in ("active", "ready", "terminating", "succeeded", "failed")},
        "startTime": timestamps, "completionTime": timestamps,
        "completedIndexes": index_text, "failedIndexes": index_text,
        "conditions": schema_conditions,
        "uncountedTerminatedPods": st.fixed_dictionaries(
            {}, optional={"succeeded": st.lists(odd_text, max_size=3),
                          "failed": st.lists(odd_text, max_size=3)}
        ),
    },
)  # fmt: skip
# What a worker may answer as a whole status: a Job-shaped one with any values, or anything.
worker_statuses = job_statuses | anything

# -- objects' metadata ------------------------------------------------------------

OUR_KEYS = (CLUSTER_ANNOTATION, PLACEMENTS_ANNOTATION, REDISPATCH_ANNOTATION, MIRRORS_ANNOTATION)
annotation_values = st.one_of(
    odd_text,
    st.sampled_from(["w1", "w1,w2", "w2,w1,w2", "never", "1:w1:m-1", "2:w2:m-2,1:w1:x", "1:w1:"]),
)
# Schema-valid (string to string) but hostile: what any user may write on a Job.
user_annotations = st.dictionaries(
    st.sampled_from(OUR_KEYS) | odd_text, annotation_values, max_size=6
)
names = st.one_of(st.sampled_from(["train", "a" * 253, "UPPER", "-x-", "a/b", "..", "é"]), odd_text)
# A worker's metadata: anything where maps of strings belong.
worker_maps = st.one_of(
    st.dictionaries(
        st.sampled_from([MIRROR_LABEL, ORIGIN_UID_LABEL, RUN_ANNOTATION, CARRIED_OVER_ANNOTATION])
        | odd_text,
        anything,
        max_size=5,
    ),
    anything,
)  # fmt: skip
