"""`KUBECONFIG=a:b` merged as kubectl merges it: the first file's entry wins per name,
current-context is the first one set, relative paths resolve against their own file,
listed files that do not exist are skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kube.connecting import context_namespace, environment_kubeconfig, merged_kubeconfig
from jobrelay.kube.errors import KubeconfigError


def config(name: str, server: str, *, current: bool = True, namespace: str = "") -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    document: dict[str, Any] = {
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "contexts": [{"name": name, "context": context}],
        "users": [{"name": name, "user": {"token": f"token-{name}"}}],
    }
    if current:
        document["current-context"] = name
    return document


def write(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def test_two_files_merge_and_the_first_current_context_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The defect: `KUBECONFIG=a:b` said "no kubeconfig found"."""
    a = write(tmp_path / "a", config("one", "https://one.example:6443"))
    b = write(tmp_path / "b", config("two", "https://two.example:6443"))
    monkeypatch.setenv("KUBECONFIG", f"{a}:{b}")
    merged = environment_kubeconfig()
    assert merged.current_context == "one"
    assert merged.get().cluster.server == "https://one.example:6443"
    assert merged.get("two").cluster.server == "https://two.example:6443"


def test_the_current_context_comes_from_the_first_file_that_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = write(tmp_path / "a", config("one", "https://one.example", current=False))
    b = write(tmp_path / "b", config("two", "https://two.example", namespace="team-b"))
    monkeypatch.setenv("KUBECONFIG", f"{a}:{b}")
    assert environment_kubeconfig().get().context_name == "two"
    assert context_namespace(None, None) == "team-b"
    assert context_namespace(None, "one") is None


def test_a_name_in_both_files_is_the_first_files(tmp_path: Path) -> None:
    first = config("same", "https://first")
    second = config("same", "https://second")
    second["current-context"] = "other"
    merged = merged_kubeconfig([(tmp_path / "a", first), (tmp_path / "b", second)])
    assert [c["cluster"]["server"] for c in merged["clusters"]] == ["https://first"]
    assert merged["current-context"] == "same"


def test_relative_files_resolve_against_their_own_kubeconfig(tmp_path: Path) -> None:
    document = config("one", "https://one")
    document["clusters"][0]["cluster"]["certificate-authority"] = "ca.crt"
    document["users"][0]["user"] = {"client-certificate": "c.crt", "client-key": "/abs/c.key"}
    merged = merged_kubeconfig([(tmp_path / "sub" / "config", document)])
    assert merged["clusters"][0]["cluster"]["certificate-authority"] == str(
        tmp_path / "sub" / "ca.crt"
    )
    assert merged["users"][0]["user"]["client-certificate"] == str(tmp_path / "sub" / "c.crt")
    assert merged["users"][0]["user"]["client-key"] == "/abs/c.key"


def test_missing_and_empty_files_in_the_list_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    b = write(tmp_path / "b", config("two", "https://two"))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{empty}:{b}")
    assert environment_kubeconfig().get().context_name == "two"


@pytest.mark.parametrize(
    ("files", "said"),
    [
        (["absent1", "absent2"], "no kubeconfig found: none of $KUBECONFIG"),
        (["absent1"], "does not exist"),
        (["empty"], "is empty"),
        (["braces"], "is empty"),
        (["no-contexts"], "has no contexts"),
        (["a-list"], "is not a kubeconfig"),
        (["a-directory"], "cannot read kubeconfig"),
    ],
)
def test_what_cannot_be_used_says_why_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: list[str], said: str
) -> None:
    (tmp_path / "empty").write_text("")
    (tmp_path / "braces").write_text("{}")
    (tmp_path / "a-list").write_text("- 1\n")
    (tmp_path / "a-directory").mkdir()
    write(tmp_path / "no-contexts", {"clusters": [{"name": "k", "cluster": {"server": "x"}}]})
    monkeypatch.setenv("KUBECONFIG", ":".join(str(tmp_path / f) for f in files))
    with pytest.raises(KubeconfigError) as raised:
        environment_kubeconfig()
    assert said in str(raised.value)
    assert "\n" not in str(raised.value)
    assert "--kubeconfig or $KUBECONFIG" in str(raised.value) or "cannot read" in str(raised.value)


names = st.sampled_from(["a", "b", "c", "d"])


@given(st.lists(st.lists(names, max_size=4), min_size=1, max_size=4))
def test_each_name_appears_once_and_is_its_first_files(files: list[list[str]]) -> None:
    documents = [
        (Path(f"/f{index}"), {
            "contexts": [{"name": n, "context": {"cluster": f"from-{index}"}} for n in listed],
        })
        for index, listed in enumerate(files)
    ]  # fmt: skip
    merged = merged_kubeconfig(documents)
    seen = [entry["name"] for entry in merged["contexts"]]
    assert len(seen) == len(set(seen))
    for entry in merged["contexts"]:
        first = next(i for i, listed in enumerate(files) if entry["name"] in listed)
        assert entry["context"]["cluster"] == f"from-{first}"
