"""The parsers of what tenants and workers hand the controller as text: API query strings
and paths, kubeconfig Secrets, placement annotations and label selectors.

Each either reads its input or refuses it with its own error type, fast: a
refusal becomes a 400, a condition or an Event; any other exception would be a
traceback in the controller.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from tests.unit.fuzz.hostile import HUGE_TEXT, anything, counted, fuzz, odd_text

from jobrelay.fleet.credentials import KubeconfigRefused, check_kubeconfig, decode_kubeconfig
from jobrelay.placement.selectors import SelectorError, parse_selector
from jobrelay.placement.workload import (
    CLUSTER_SELECTOR_ANNOTATION,
    CLUSTERS_ANNOTATION,
    PLACEMENT_ANNOTATION,
    Choice,
    Invalid,
    read_choice,
)
from jobrelay.relayapi.route_rules import BadRequest, LogQuery, match_route, parse_log_query
from jobrelay.vocabulary.placement import not_placed_reason, placements_of, run_of

# What a query value may look like: digits of every script, signs, huge numbers.
query_values = st.one_of(
    odd_text,
    st.sampled_from(
        ["²", "٣", "¹⁰", "9" * 5000, "-1", "+1", "1e3", "0x10", " 1", "1 ", "true", "TRUE", "no"]
    ),
    st.integers(-(10**30), 10**30).map(str),
)
query_keys = st.one_of(
    st.sampled_from(
        ["kind", "container", "index", "allPods", "previous", "tailLines", "sinceSeconds",
         "timestamps", "follow"]
    ),
    odd_text,
)  # fmt: skip


@fuzz(800)
@given(st.dictionaries(query_keys, query_values, max_size=6))
@example({"tailLines": "²"})
@example({"index": "9" * 5000})
@example({"sinceSeconds": "٣"})
@counted
def test_any_log_query_parses_or_is_a_bad_request(params: dict[str, str]) -> None:
    try:
        query = parse_log_query(params)
    except BadRequest:
        return
    assert isinstance(query, LogQuery)
    for count in (query.index, query.tail_lines, query.since_seconds):
        assert count is None or count >= 0


@fuzz(400)
@given(st.one_of(odd_text, st.lists(odd_text, max_size=8).map("/".join)))
@example("/v1/namespaces/%2F/jobs/x/logs")
@counted
def test_any_path_matches_a_route_or_none(path: str) -> None:
    route = match_route(path)
    assert route is None or route.what in ("logs", "mirror")


kubeconfig_like = st.fixed_dictionaries(
    {},
    optional={
        "clusters": anything | st.lists(st.fixed_dictionaries({"name": odd_text, "cluster": anything}), max_size=2),
        "users": anything | st.lists(st.fixed_dictionaries({"name": odd_text, "user": anything}), max_size=2),
        "contexts": anything | st.lists(st.fixed_dictionaries({"name": odd_text, "context": anything}), max_size=2),
        "current-context": odd_text | anything,
    },
)  # fmt: skip


def _secret_value(document: Any) -> str:
    try:
        text = yaml.safe_dump(document)
    except yaml.YAMLError:
        text = str(document)
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


@fuzz(400)
@given(
    st.one_of(
        kubeconfig_like.map(_secret_value),
        anything.map(_secret_value),
        st.binary(max_size=200).map(lambda raw: base64.b64encode(raw).decode()),
        odd_text,
    ),
    st.booleans(),
)
@example(base64.b64encode(b"a: &a [*a]").decode(), False)
@example(base64.b64encode(b"[" * 20_000).decode(), False)
@example(base64.b64encode(b"\xff\xfe").decode(), True)
@counted
def test_any_kubeconfig_secret_is_read_or_refused(data: str, allow_exec: bool) -> None:
    try:
        config = decode_kubeconfig(data, "Secret ns/name key 'kubeconfig'")
        check_kubeconfig(config, allow_exec=allow_exec)
    except KubeconfigRefused as refused:
        assert str(refused)


annotation_keys = st.one_of(
    st.sampled_from(
        [CLUSTERS_ANNOTATION, CLUSTER_SELECTOR_ANNOTATION, PLACEMENT_ANNOTATION,
         "jobrelay.dev/cluster", "jobrelay.dev/placements", "jobrelay.dev/not-placed"]
    ),
    odd_text,
)  # fmt: skip


@fuzz(800)
@given(st.dictionaries(annotation_keys, st.one_of(odd_text, HUGE_TEXT), max_size=6))
@example({CLUSTER_SELECTOR_ANNOTATION: "a in (" * 5000})
@example({CLUSTERS_ANNOTATION: "," * 20_000})
@example({"jobrelay.dev/placements": "w," * 50_000})
@counted
def test_any_annotations_read_as_a_choice_and_a_placement(annotations: dict[str, str]) -> None:
    choice = read_choice(annotations)
    assert isinstance(choice, Choice | Invalid)
    obj = {"metadata": {"annotations": annotations}}
    assert run_of(obj) == len(placements_of(obj))
    assert isinstance(not_placed_reason(obj), str)


@fuzz(800)
@given(st.one_of(odd_text, st.from_regex(r"[a-z0-9=!,() .\-/]{0,60}", fullmatch=True)))
@example("a in (" * 5000)
@example("!" * 20_000)
@counted
def test_any_selector_text_parses_or_is_refused(text: str) -> None:
    try:
        parse_selector(text)
    except SelectorError as error:
        assert str(error)
