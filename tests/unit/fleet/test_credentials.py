"""Which worker kubeconfigs jobrelay accepts (fleet/credentials.py).

Each refused field is named by its path; no message ever quotes a value: the
secret values below are distinctive strings, asserted absent from every message.
Fuzzing feeds the checker and the Secret decoder any structure, any bytes and
huge strings: only KubeconfigRefused comes out, quickly, and never a secret.
"""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightkube.config import models

from jobrelay.fleet import credentials
from jobrelay.fleet.credentials import KubeconfigRefused, check_kubeconfig, decode_kubeconfig

SECRET = "s3cr3t-VALUE-b1f9e2"
SECRET_B64 = base64.b64encode(f"-----BEGIN {SECRET}-----".encode()).decode()


def kubeconfig(
    user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None, **top: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "w1", "cluster": {"server": "https://127.0.0.1:6443", **(cluster or {})}}
        ],
        "users": [{"name": "admin", "user": {"token": SECRET} if user is None else user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "w1", "user": "admin"}}],
        "current-context": "ctx",
        **top,
    }


EXEC = {
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "command": f"/usr/bin/{SECRET}",
    "args": ["--token", SECRET],
    "env": [{"name": "KEY", "value": SECRET}],
}


def refusal(config: object, **options: Any) -> str:
    with pytest.raises(KubeconfigRefused) as raised:
        check_kubeconfig(config, **{"allow_exec": False, **options})
    message = str(raised.value)
    assert SECRET not in message and SECRET_B64 not in message, message
    return message


@pytest.mark.parametrize(
    ("config", "options", "expected"),
    [
        (kubeconfig({"exec": EXEC}), {},
         'users[0] "admin": exec credential plugins are refused '
         "(jobrelay run --allow-exec-credentials allows them)"),
        (kubeconfig({"tokenFile": f"/var/run/{SECRET}"}), {},
         'users[0] "admin": tokenFile is refused'),
        (kubeconfig({"tokenFile": f"/var/run/{SECRET}"}), {"allow_exec": True},
         'users[0] "admin": tokenFile is refused'),
        (kubeconfig({"tokenFile": "/t"}), {"allow_inlinable_files": True},
         "tokenFile is refused"),
        (kubeconfig({"client-certificate": f"/{SECRET}.crt", "client-key-data": SECRET_B64}),
         {"allow_exec": True}, 'users[0] "admin": client-certificate names a file'),
        (kubeconfig({"client-key": f"/{SECRET}.key"}), {}, 'users[0] "admin": client-key names a file'),
        (kubeconfig(cluster={"certificate-authority": f"/{SECRET}"}), {},
         'clusters[0] "w1": certificate-authority names a file'),
        (kubeconfig({"auth-provider": {"name": "gcp", "config": {"cmd-path": SECRET}}}),
         {"allow_exec": True}, 'users[0] "admin": auth-provider is refused'),
        (kubeconfig(cluster={"insecure-skip-tls-verify": True}), {},
         'clusters[0] "w1": insecure-skip-tls-verify: true is refused'),
        (kubeconfig(cluster={"insecure-skip-tls-verify": "true"}), {},
         "insecure-skip-tls-verify is not true or false"),
        (kubeconfig({"exec": {**EXEC, "apiVersion": "client.authentication.k8s.io/v1"}}),
         {"allow_exec": True}, "exec apiVersion is not one jobrelay speaks"),
        (kubeconfig({"exec": {**EXEC, "command": ""}}), {"allow_exec": True}, "exec has no command"),
        (kubeconfig({"exec": {**EXEC, "args": SECRET}}), {"allow_exec": True},
         "exec args is not a list of strings"),
        (kubeconfig({"exec": {**EXEC, "env": [{"name": "K"}]}}), {"allow_exec": True},
         "exec env is not a list"),
        (kubeconfig({"exec": {**EXEC}}), {"exec_flag": credentials.ADD_EXEC_FLAG},
         "(jobrelay clusters add --allow-exec-credentials allows them)"),
    ],
)  # fmt: skip
def test_each_unsafe_field_is_refused_by_its_path(
    config: dict[str, Any], options: dict[str, Any], expected: str
) -> None:
    assert expected in refusal(config, **options)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ([SECRET], "the kubeconfig is not a mapping"),
        (SECRET, "the kubeconfig is not a mapping"),
        (kubeconfig(clusters={"name": SECRET}), "clusters: is not a list"),
        (kubeconfig(clusters=[SECRET]), "clusters[0]: is not a mapping with name and cluster"),
        (kubeconfig(clusters=[{"cluster": {"server": SECRET}}]), "clusters[0]: has no name"),
        (kubeconfig(clusters=[{"name": "w1", "cluster": SECRET}]),
         'clusters[0] "w1": cluster is not a mapping'),
        (kubeconfig(clusters=[{"name": "w1", "cluster": {}}]), 'clusters[0] "w1": has no server'),
        (kubeconfig(cluster={"server": 6443}), "server is not a string"),
        (kubeconfig({"token": 12345}), 'users[0] "admin": token is not a string'),
        (kubeconfig({"client-key-data": SECRET + "=="}), "client-key-data is not valid base64"),
        (kubeconfig(cluster={"certificate-authority-data": "a"}),
         "certificate-authority-data is not valid base64"),
        (kubeconfig(**{"current-context": None}), "current-context: is not set"),
        (kubeconfig(**{"current-context": "other"}), "current-context: names no entry of contexts"),
        (kubeconfig(contexts=[{"name": "ctx", "context": {"cluster": "nope", "user": "admin"}}]),
         'contexts[0] "ctx": its cluster is not an entry of clusters'),
        (kubeconfig(contexts=[{"name": "ctx", "context": {"cluster": "w1", "user": "nope"}}]),
         'contexts[0] "ctx": its user is not an entry of users'),
        (kubeconfig(contexts=[{"name": "ctx", "context": None}]),
         'contexts[0] "ctx": context is not a mapping'),
    ],
)  # fmt: skip
def test_a_malformed_kubeconfig_is_refused_with_a_clear_message(
    config: object, expected: str
) -> None:
    assert expected in refusal(config)


def test_the_chosen_context_must_exist() -> None:
    assert "the chosen context: names no entry of contexts" in refusal(kubeconfig(), context="x")


def test_entries_no_context_uses_are_checked_too() -> None:
    # Switching spec.context must never reach an entry nobody checked.
    config = kubeconfig()
    config["users"].append({"name": "spare", "user": {"tokenFile": "/etc/passwd"}})
    assert 'users[1] "spare": tokenFile is refused' in refusal(config)


def test_a_name_that_does_not_look_like_one_is_not_quoted() -> None:
    config = kubeconfig({"exec": EXEC})
    config["users"][0]["name"] = config["contexts"][0]["context"]["user"] = SECRET + " " + SECRET
    assert refusal(config).startswith("users[0]: exec credential plugins are refused")


@pytest.mark.parametrize(
    ("config", "options"),
    [
        (kubeconfig(), {}),
        (kubeconfig({"client-certificate-data": SECRET_B64, "client-key-data": SECRET_B64}), {}),
        (kubeconfig({"username": "u", "password": SECRET}), {}),
        (kubeconfig({}), {}),
        (kubeconfig(None, {"insecure-skip-tls-verify": False, "tls-server-name": "w"}), {}),
        (kubeconfig(None, {"certificate-authority-data": SECRET_B64}), {}),
        (kubeconfig({"exec": EXEC}), {"allow_exec": True}),
        (kubeconfig({"exec": {"apiVersion": EXEC["apiVersion"], "command": "aws"}}),
         {"allow_exec": True}),
        (kubeconfig({"client-certificate": "a.crt", "client-key": "a.key"},
                    {"certificate-authority": "ca.crt"}), {"allow_inlinable_files": True}),
        (kubeconfig(contexts=[{"name": "ctx", "context": {"cluster": "w1"}}], users=None), {}),
        (kubeconfig(**{"current-context": None}), {"context": "ctx"}),
    ],
)  # fmt: skip
def test_safe_kubeconfigs_are_accepted(config: dict[str, Any], options: dict[str, Any]) -> None:
    before = copy.deepcopy(config)
    check_kubeconfig(config, **{"allow_exec": False, **options})
    assert config == before


def test_the_checker_knows_every_field_lightkube_acts_on() -> None:
    """A lightkube upgrade that reads a new kubeconfig field must be looked at here."""

    def names(struct: Any) -> set[str]:
        return {f.encode_name for f in msgspec.structs.fields(struct)}

    assert names(models.User) == {
        "exec", "username", "password", "token", "tokenFile", "auth-provider",
        "client-certificate", "client-certificate-data", "client-key", "client-key-data",
    }  # fmt: skip
    assert names(models.Cluster) == {
        "server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify",
    }  # fmt: skip
    assert names(models.UserExec) == {"apiVersion", "command", "env", "args", "installHint"}


# -- the Secret's data --------------------------------------------------------------


def encoded(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


WHERE = "Secret ns/s key 'kubeconfig'"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, "is not a kubeconfig: it is empty"),
        ("", "is not a kubeconfig: it is empty"),
        (SECRET, "is not a kubeconfig: not valid base64"),
        (encoded(f"users:\n- user: {{token: {SECRET}: x}}\n"), "invalid YAML at line 2"),
        (encoded(f"token: *{SECRET}\n"), "found undefined alias '...'"),
        (encoded(f"token: !!{SECRET} x\n"), "for the tag '...'"),
        (encoded(b"\xff\xfe" + SECRET.encode()), "is not a kubeconfig"),
        (encoded(f"- {SECRET}\n"), "is not a kubeconfig: not a mapping"),
        (encoded("[" * 5000), "is not a kubeconfig"),
    ],
)
def test_undecodable_secret_data_is_refused_without_its_content(
    data: object, expected: str
) -> None:
    with pytest.raises(KubeconfigRefused) as raised:
        decode_kubeconfig(data, WHERE)
    message = str(raised.value)
    assert message.startswith(WHERE) and expected in message, message
    assert SECRET not in message, message


def test_decoding_gives_the_kubeconfig() -> None:
    config = kubeconfig()
    assert decode_kubeconfig(encoded(yaml.safe_dump(config)), WHERE) == config


# -- fuzzing ------------------------------------------------------------------------

FUZZ_EXAMPLES = 300
VOCABULARY = (
    "apiVersion", "kind", "clusters", "users", "contexts", "current-context", "name", "cluster",
    "user", "context", "server", "token", "tokenFile", "exec", "command", "args", "env", "value",
    "auth-provider", "client-certificate", "client-key", "client-key-data",
    "client-certificate-data", "certificate-authority", "certificate-authority-data",
    "insecure-skip-tls-verify", "username", "password",
)  # fmt: skip
secrets = st.sampled_from([SECRET, SECRET_B64, f"/run/{SECRET}", "A" * 20_000 + SECRET])
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
    st.sampled_from(["w1", "admin", "ctx", "client.authentication.k8s.io/v1beta1"]), secrets,
)  # fmt: skip
keys = st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=8))
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=6),
    max_leaves=30,
)


YAML_PIECES = st.sampled_from([
    "token: ", SECRET, ": ", "{", "}", "[", "]", "*", "&", "!!", "!", "\n", "- ", "'", '"', "  ",
    ",", "%TAG ", "? ", "|", ">", "\t", "#", "\\x", "---", "@",
])  # fmt: skip


def unnamed(value: Any) -> Any:
    """``value`` with no secret as an entry name: a printable name is quoted, by design."""
    if isinstance(value, dict):
        return {
            k: ("n" if k == "name" and isinstance(v, str) and SECRET in v else unnamed(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [unnamed(v) for v in value]
    return value


def near_kubeconfigs() -> st.SearchStrategy[Any]:
    """A valid kubeconfig with parts replaced by anything: deeper than pure noise gets."""

    def mutate(base: dict[str, Any], path: list[Any], value: Any) -> Any:
        config = copy.deepcopy(base)
        target: Any = config
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        return config

    paths = st.sampled_from([
        ["users", 0, "user"], ["users", 0, "user", "exec"], ["users", 0], ["clusters", 0],
        ["clusters", 0, "cluster"], ["contexts", 0, "context"], ["current-context"],
        ["users", 0, "user", "token"], ["clusters", 0, "cluster", "server"], ["users"],
    ])  # fmt: skip
    bases = st.sampled_from([kubeconfig(), kubeconfig({"exec": EXEC})])
    return st.builds(mutate, bases, paths, anything)


def fuzz(strategy: st.SearchStrategy[Any], body: Callable[[Any], None]) -> int:
    """Run ``body`` on FUZZ_EXAMPLES examples; the count that ran."""
    ran = 0

    @settings(
        max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    @given(strategy)
    def run(example: Any) -> None:
        nonlocal ran
        ran += 1
        started = time.monotonic()
        body(example)
        assert time.monotonic() - started < 5.0, "too slow: a hang in the making"

    run()
    return ran


def report(
    capsys: pytest.CaptureFixture[str], record: Callable[[str, object], None], name: str, ran: int
) -> None:
    record(f"{name}_examples", ran)
    with capsys.disabled():
        print(f"\n[fuzz] {name}: {ran} examples (max_examples={FUZZ_EXAMPLES})")
    assert ran >= FUZZ_EXAMPLES // 2


def only_refusals(config: Any, **options: Any) -> None:
    try:
        check_kubeconfig(unnamed(config), **{"allow_exec": False, **options})
    except KubeconfigRefused as refused:
        assert SECRET not in str(refused), str(refused)[:300]


def test_fuzz_the_checker_raises_only_its_error(
    capsys: pytest.CaptureFixture[str], record_property: Callable[[str, object], None]
) -> None:
    strategy = st.one_of(anything, near_kubeconfigs())
    ran = fuzz(
        st.tuples(strategy, st.booleans(), st.booleans()),
        lambda e: only_refusals(e[0], allow_exec=e[1], allow_inlinable_files=e[2]),
    )
    report(capsys, record_property, "check_kubeconfig", ran)


def decodes_or_refuses(data: Any) -> None:
    try:
        config = decode_kubeconfig(data, WHERE)
    except KubeconfigRefused as refused:
        assert SECRET not in str(refused), str(refused)[:300]
        return
    only_refusals(config)


def as_secret_data(value: Any) -> str:
    """``value`` as a Secret's data: base64 of YAML, of JSON, or of raw bytes."""
    kind, payload = value
    if kind == "yaml":
        return encoded(yaml.safe_dump(payload))
    if kind == "json":
        return encoded(msgspec.json.encode(payload))
    return encoded(payload) if kind == "bytes" else str(payload)


def test_fuzz_decoding_secret_data_raises_only_its_error(
    capsys: pytest.CaptureFixture[str], record_property: Callable[[str, object], None]
) -> None:
    documents = st.one_of(
        st.tuples(st.just("yaml"), st.one_of(anything, near_kubeconfigs())),
        st.tuples(st.just("json"), anything.filter(lambda v: v == v)),  # NaN is no JSON
        st.tuples(st.just("bytes"), st.binary(max_size=200).map(lambda b: b + SECRET.encode())),
        # YAML text cut anywhere, and raw (not base64) text.
        st.tuples(
            st.just("bytes"),
            st.builds(
                lambda c, n: yaml.safe_dump(c)[:n].encode(), near_kubeconfigs(), st.integers(0, 400)
            ),
        ),
        st.tuples(st.just("raw"), st.text(max_size=40).map(lambda t: t + SECRET)),
        # YAML-looking text from its syntax's pieces, the secret among them.
        st.tuples(
            st.just("bytes"), st.lists(YAML_PIECES, max_size=30).map(lambda p: "".join(p).encode())
        ),
    )
    ran = fuzz(documents.map(as_secret_data), decodes_or_refuses)
    report(capsys, record_property, "decode_kubeconfig", ran)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        (b"[" * 100_000, True),
        (b"a: " + b"{b: " * 65 + b"c" + b"}" * 65, True),
        (b"a: " + b"[" * 64 + b"]" * 64, False),
        (b'args: ["]]]]", [x]]\nb: [[y]]', False),
        (b"]]]]" + b"[" * 65, True),  # closers first do not buy depth
    ],
)
def test_deep_nesting_is_refused_before_yaml_reads_it(text: bytes, refused: bool) -> None:
    """PyYAML's scanner costs quadratic time in the depth of "[[[[..." (seconds of the
    event loop for 20 kB); such a Secret is refused before it is parsed."""
    data = base64.b64encode(text).decode()
    if refused:
        with pytest.raises(KubeconfigRefused, match="nested deeper than 64"):
            decode_kubeconfig(data, "Secret s")
    else:
        try:
            decode_kubeconfig(data, "Secret s")
        except KubeconfigRefused as error:
            assert "nested" not in str(error)
