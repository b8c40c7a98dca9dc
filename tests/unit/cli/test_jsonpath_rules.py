"""kubectl's JSONPath templates (jsonpath_rules, output_rules, types_rules): the cases
kubectl's documentation shows, and properties over any JSON."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.cli.jsonpath_rules import JsonPathError, Template, relaxed
from jobrelay.cli.output_rules import label_header, parse_output, sort_key_path, sorted_by
from jobrelay.cli.types_rules import (
    ArgumentsError,
    KindNames,
    TypeRequest,
    match_type,
    requests_of,
)

# kubectl's documented example object.
DOC: dict[str, Any] = {
    "kind": "List",
    "items": [
        {"kind": "None", "metadata": {"name": "127.0.0.1", "labels": {"app.kubernetes.io/x": "y"}},
         "status": {"capacity": {"cpu": "4"},
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]}},
        {"kind": "None", "metadata": {"name": "127.0.0.2"},
         "status": {"capacity": {"cpu": "8"},
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.2"},
                                  {"type": "another", "address": "127.0.0.3"}]}},
    ],
    "users": [{"name": "myself", "user": {}}, {"name": "e2e", "user": {"username": "admin"}}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.kind}", "List"),
        ("{['kind']}", "List"),
        ("{$.kind}", "List"),
        ("{..name}", "127.0.0.1 127.0.0.2 myself e2e"),
        ("{.items[*].metadata.name}", "127.0.0.1 127.0.0.2"),
        ("{.items[0].metadata.name}", "127.0.0.1"),
        ("{.items[-1].metadata.name}", "127.0.0.2"),
        ("{.items[0:1].metadata.name}", "127.0.0.1"),
        ("{.items[*]['metadata.name', 'status.capacity']}", ""),  # unions: not in the subset
        ('{.users[?(@.name=="e2e")].user.username}', "admin"),
        ("{.items[?(@.status.capacity.cpu=='8')].metadata.name}", "127.0.0.2"),
        ("{.users[?(@.user.username)].name}", "e2e"),
        (
            "{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}",
            '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] ',
        ),
        ('{range .items[*]}{.metadata.name}{"\\t"}{end}', "127.0.0.1\t127.0.0.2\t"),
        (
            "{range .items[*]}{range .status.addresses[*]}{.address};{end}|{end}",
            "127.0.0.1;|127.0.0.2;127.0.0.3;|",
        ),
        ("{.items[0].metadata.labels.app\\.kubernetes\\.io/x}", "y"),
        ("{.missing}", ""),
        ("text {.kind} text", "text List text"),
        ("{.items[0].status.capacity.cpu}", "4"),
    ],
)
def test_kubectls_examples(template: str, expected: str) -> None:
    assert Template(template).render(DOC) == expected


@pytest.mark.parametrize(
    "template", ["{.items[*", "{range .items[*]}{.x}", "{.a}{end}", "{.items[x]}", "{"]
)
def test_malformed_templates_are_refused_in_one_line(template: str) -> None:
    with pytest.raises(JsonPathError) as raised:
        Template(template)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("given", "expected"),
    [(".a.b", "{.a.b}"), ("a.b", "{.a.b}"), ("{.a.b}", "{.a.b}"), ("{a}", "{.a}")],
)
def test_relaxed_paths(given: str, expected: str) -> None:
    assert relaxed(given) == expected


def test_output_formats() -> None:
    assert parse_output(None).is_table and parse_output("wide").is_table
    assert parse_output("jsonpath={.a}").template is not None
    assert parse_output("jsonpath-as-json={.a}").as_json
    assert [h for h, _ in parse_output("custom-columns=A:.a,B:b").columns] == ["A", "B"]
    for bad in ("table", "jsonpath=", "custom-columns=A", "custom-columns=:x"):
        with pytest.raises(JsonPathError):
            parse_output(bad)


def test_sorting_puts_missing_first_and_numbers_in_order() -> None:
    items = [{"v": 10}, {"v": 9}, {}, {"v": "b"}, {"v": "a"}]
    assert sorted_by(items, sort_key_path("v")) == [{}, {"v": 9}, {"v": 10}, {"v": "a"}, {"v": "b"}]


def test_label_headers() -> None:
    assert label_header("team") == "TEAM"
    assert label_header("app.kubernetes.io/name") == "NAME"


RAY = KindNames.of(
    "RayJob.v1.ray.io", {"name": "rayjobs", "singularName": "rayjob", "shortNames": ["rj"]}
)
JOB = KindNames.of("Job.v1.batch")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rayjobs", ["RayJob.v1.ray.io"]), ("rayjob", ["RayJob.v1.ray.io"]),
        ("rj", ["RayJob.v1.ray.io"]), ("RayJob", ["RayJob.v1.ray.io"]),
        ("rayjobs.ray.io", ["RayJob.v1.ray.io"]), ("jobs", ["Job.v1.batch"]),
        ("all", ["Job.v1.batch", "RayJob.v1.ray.io"]),
        ("PyTorchJob.v1.kubeflow.org", ["PyTorchJob.v1.kubeflow.org"]),  # named in full
        ("pytorchjobs", []), ("rayjobs.other.io", []),
    ],
)  # fmt: skip
def test_type_names(text: str, expected: list[str]) -> None:
    assert [k.name for k in match_type(text, [JOB, RAY])] == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([], [TypeRequest("jobs")]),
        (["jobsets"], [TypeRequest("jobsets")]),
        (["jobs,jobsets"], [TypeRequest("jobs"), TypeRequest("jobsets")]),
        (["job", "a", "b"], [TypeRequest("job", ("a", "b"))]),
        (
            ["job/a", "jobset/b", "job/c"],
            [TypeRequest("job", ("a", "c")), TypeRequest("jobset", ("b",))],
        ),
    ],
)
def test_argument_forms(arguments: list[str], expected: list[TypeRequest]) -> None:
    assert requests_of(arguments) == expected


@pytest.mark.parametrize("arguments", [["job/a", "b"], ["job", "x/y"], ["a,b", "n"], ["/a"]])
def test_mixed_argument_forms_are_refused(arguments: list[str]) -> None:
    with pytest.raises(ArgumentsError):
        requests_of(arguments)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


@given(json_values)
def test_any_template_renders_any_json_without_raising(document: Any) -> None:
    for template in ("{..a}", "{.items[*].b}", "{range .*}{@}{end}", "{.x[?(@.y>1)]}"):
        assert isinstance(Template(template).render(document), str)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.text(max_size=5)))
def test_a_field_renders_its_string(document: dict[str, str]) -> None:
    for key, value in document.items():
        assert Template(f"{{.{key}}}").render(document) == value
