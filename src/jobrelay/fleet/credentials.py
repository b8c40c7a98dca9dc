"""Which worker kubeconfigs jobrelay accepts: pure functions, no I/O.

A kubeconfig Secret is written by whoever may write Secrets in the
controller's namespace, and the controller turns it into a client. Some
kubeconfig fields make the client act on the controller's own machine
rather than just talk to the worker:

- ``exec`` runs a command (a credential plugin) in the controller;
- ``tokenFile``, ``certificate-authority``, ``client-certificate`` and
  ``client-key`` read a file of the controller's (its own service-account
  token, say) and send it, or trust it, on the worker's connection;
- ``auth-provider`` runs provider code (and ``cmd-path`` commands);
- ``insecure-skip-tls-verify: true`` sends the credentials to whoever answers.

Each is refused, with a message naming the field by its path in the
kubeconfig and never quoting a value. ``exec`` alone can be allowed by the
admin (managed clouds' kubeconfigs need it); files never are.

Every cluster and user entry is checked, not only those the chosen context
uses: the Secret is accepted or refused as a whole, so that switching
``spec.context`` (an edit of the WorkerCluster, which another person may make)
can never reach an entry nobody checked; and a Secret written by
``jobrelay clusters add`` holds one context only, so nothing legitimate is lost.

Fields unknown to the client library are ignored by it, and so here; a unit
test pins lightkube's kubeconfig models to the fields this module knows, so a
library upgrade that acts on a new field fails it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from jobrelay.kube.redact import yaml_problem

__all__ = [
    "ADD_EXEC_FLAG",
    "CLUSTER_FILE_FIELDS",
    "EXEC_API_VERSIONS",
    "INLINABLE_FILE_FIELDS",
    "RUN_EXEC_FLAG",
    "USER_FILE_FIELDS",
    "KubeconfigRefused",
    "check_kubeconfig",
    "decode_kubeconfig",
    "entry_label",
]

# The flags that allow exec plugins, named in the refusal.
RUN_EXEC_FLAG = "jobrelay run --allow-exec-credentials"
ADD_EXEC_FLAG = "jobrelay clusters add --allow-exec-credentials"

# Fields whose value is a path on the machine that reads the kubeconfig.
CLUSTER_FILE_FIELDS = ("certificate-authority",)
USER_FILE_FIELDS = ("client-certificate", "client-key", "tokenFile")
# The file fields `jobrelay clusters add` turns into their *-data form.
INLINABLE_FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key")
# The exec plugin API versions lightkube speaks.
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)

# Fields whose value must be a string (the client fails obscurely otherwise).
_CLUSTER_STRINGS = ("server", "certificate-authority-data", "tls-server-name", "proxy-url")
_USER_STRINGS = ("token", "username", "password", "client-certificate-data", "client-key-data")
_BASE64_FIELDS = ("certificate-authority-data", "client-certificate-data", "client-key-data")
# Entry names are quoted in messages only when they look like names: a long or
# odd one might be a pasted credential.
_PRINTABLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:/-]{0,62}$")
_TOKEN_FILE_ADVICE = (
    "its file would be read on the machine that uses the kubeconfig, and a copy of it "
    "goes stale when the token rotates: register the worker with "
    "`jobrelay clusters add --create-service-account`, or put the token inline (token)"
)


class KubeconfigRefused(ValueError):
    """A kubeconfig jobrelay will not use; the message names the field, never its value.

    A ValueError, like the kube layer's KubeconfigError, so that every caller
    that turns an unusable kubeconfig into ``InvalidKubeconfig`` handles it.
    """

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem


def entry_label(section: str, index: int, name: object) -> str:
    """``users[0] "admin"``: where an entry is, and its name when printable."""
    label = f"{section}[{index}]"
    if isinstance(name, str) and _PRINTABLE_NAME.match(name):
        label += f' "{name}"'
    return label


def check_kubeconfig(
    config: object,
    *,
    allow_exec: bool,
    context: str | None = None,
    allow_inlinable_files: bool = False,
    exec_flag: str = RUN_EXEC_FLAG,
) -> None:
    """Raise :class:`KubeconfigRefused` unless ``config`` is a kubeconfig jobrelay may use.

    ``context`` (default: its current-context) must exist and name existing
    entries. ``allow_inlinable_files`` lets certificate, key and CA paths
    through: `jobrelay clusters add` inlines them before it checks again.
    ``exec_flag`` is the flag the exec refusal suggests.
    """
    if not isinstance(config, Mapping):
        raise KubeconfigRefused("", "the kubeconfig is not a mapping (kind: Config)")
    clusters = _entries(config, "clusters", "cluster")
    users = _entries(config, "users", "user")
    contexts = _entries(config, "contexts", "context")
    for index, name, cluster in clusters:
        _check_cluster(entry_label("clusters", index, name), cluster, allow_inlinable_files)
    for index, name, user in users:
        _check_user(
            entry_label("users", index, name), user, allow_exec=allow_exec,
            allow_inlinable_files=allow_inlinable_files, exec_flag=exec_flag,
        )  # fmt: skip
    _check_context(config, context, clusters, users, contexts)


def _entries(
    config: Mapping[str, Any], section: str, key: str
) -> list[tuple[int, str, Mapping[str, Any]]]:
    """The named entries of ``clusters``, ``users`` or ``contexts``, shape-checked."""
    raw = config.get(section)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise KubeconfigRefused(section, "is not a list")
    entries = []
    for index, entry in enumerate(raw):
        where = f"{section}[{index}]"
        if not isinstance(entry, Mapping):
            raise KubeconfigRefused(where, f"is not a mapping with name and {key}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise KubeconfigRefused(where, "has no name")
        body = entry.get(key)
        if body is None and key == "user":
            body = {}  # a user with no credentials at all: anonymous
        if not isinstance(body, Mapping):
            raise KubeconfigRefused(entry_label(section, index, name), f"{key} is not a mapping")
        entries.append((index, name, body))
    return entries


def _check_strings(where: str, section: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    for field in fields:
        value = section.get(field)
        if value is not None and not isinstance(value, str):
            raise KubeconfigRefused(where, f"{field} is not a string")
    for field in _BASE64_FIELDS:
        value = section.get(field)
        if isinstance(value, str):
            try:
                base64.b64decode(value)
            except (binascii.Error, ValueError):
                raise KubeconfigRefused(where, f"{field} is not valid base64") from None


def _check_cluster(where: str, cluster: Mapping[str, Any], allow_inlinable_files: bool) -> None:
    _refuse_files(where, cluster, CLUSTER_FILE_FIELDS, allow_inlinable_files)
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigRefused(where, "insecure-skip-tls-verify is not true or false")
    if insecure:
        raise KubeconfigRefused(
            where,
            "insecure-skip-tls-verify: true is refused: the credentials would go to whoever "
            "answers at the server's address (use certificate-authority-data)",
        )
    _check_strings(where, cluster, _CLUSTER_STRINGS)
    if not cluster.get("server"):
        raise KubeconfigRefused(where, "has no server")


def _refuse_files(
    where: str, section: Mapping[str, Any], fields: Iterable[str], allow_inlinable_files: bool
) -> None:
    """A field naming a file is refused, unless it is one ``clusters add`` inlines."""
    for field in fields:
        if field in section and not (allow_inlinable_files and field in INLINABLE_FILE_FIELDS):
            raise KubeconfigRefused(
                where,
                f"{field} names a file, which is refused: a file would be read on the "
                f"machine that uses the kubeconfig (use {field}-data)",
            )
        if allow_inlinable_files:
            _check_path(where, section, field)


def _check_path(where: str, section: Mapping[str, Any], field: str) -> None:
    value = section.get(field)
    if value is not None and (not isinstance(value, str) or not value):
        raise KubeconfigRefused(where, f"{field} is not a file path")


def _check_user(
    where: str,
    user: Mapping[str, Any],
    *,
    allow_exec: bool,
    allow_inlinable_files: bool,
    exec_flag: str,
) -> None:
    if "tokenFile" in user:
        raise KubeconfigRefused(where, f"tokenFile is refused: {_TOKEN_FILE_ADVICE}")
    _refuse_files(where, user, USER_FILE_FIELDS, allow_inlinable_files)
    if "auth-provider" in user:
        raise KubeconfigRefused(
            where,
            "auth-provider is refused: provider plugins run code and are gone from "
            "Kubernetes clients (use a token, a client certificate or an exec plugin)",
        )
    if "exec" in user:
        if not allow_exec:
            raise KubeconfigRefused(
                where,
                f"exec credential plugins are refused ({exec_flag} allows them)",
            )
        _check_exec(where, user["exec"])
    _check_strings(where, user, _USER_STRINGS)


def _check_exec(where: str, plugin: object) -> None:
    if not isinstance(plugin, Mapping):
        raise KubeconfigRefused(where, "exec is not a mapping")
    command = plugin.get("command")
    if not isinstance(command, str) or not command:
        raise KubeconfigRefused(where, "exec has no command")
    if plugin.get("apiVersion") not in EXEC_API_VERSIONS:
        raise KubeconfigRefused(
            where, f"exec apiVersion is not one jobrelay speaks ({', '.join(EXEC_API_VERSIONS)})"
        )
    args = plugin.get("args")
    if args is not None and not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise KubeconfigRefused(where, "exec args is not a list of strings")
    env = plugin.get("env")
    if env is not None and not (isinstance(env, list) and all(map(_is_env_var, env))):
        raise KubeconfigRefused(where, "exec env is not a list of name/value strings")


def _is_env_var(entry: object) -> bool:
    return (
        isinstance(entry, Mapping)
        and isinstance(entry.get("name"), str)
        and isinstance(entry.get("value"), str)
    )


def _check_context(
    config: Mapping[str, Any],
    context: str | None,
    clusters: list[tuple[int, str, Mapping[str, Any]]],
    users: list[tuple[int, str, Mapping[str, Any]]],
    contexts: list[tuple[int, str, Mapping[str, Any]]],
) -> None:
    chosen = context or config.get("current-context")
    if not chosen or not isinstance(chosen, str):
        raise KubeconfigRefused(
            "current-context", "is not set, and no context was chosen (WorkerCluster spec.context)"
        )
    found = [(index, body) for index, name, body in contexts if name == chosen]
    if not found:
        where = "the chosen context" if context else "current-context"
        raise KubeconfigRefused(where, "names no entry of contexts")
    index, body = found[0]
    where = entry_label("contexts", index, chosen)
    cluster = body.get("cluster")
    if not isinstance(cluster, str) or cluster not in {name for _, name, _ in clusters}:
        raise KubeconfigRefused(where, "its cluster is not an entry of clusters")
    user = body.get("user")
    if user is not None and (
        not isinstance(user, str) or user not in {name for _, name, _ in users}
    ):
        raise KubeconfigRefused(where, "its user is not an entry of users")


# A kubeconfig nests a few levels; PyYAML's scanner costs quadratic time in the depth
# of flow collections ("[[[[...": seconds of the event loop before its RecursionError).
MAX_NESTING = 64
_NOT_A_BRACKET = re.compile(rb"[^\[\]{}]+")


def nesting_problem(text: bytes) -> str | None:
    """Why ``text`` nests too deep to be read as a kubeconfig (None: it does not).

    Brackets inside quoted strings count too: an over-estimate no kubeconfig reaches.
    """
    depth = deepest = 0
    for bracket in _NOT_A_BRACKET.sub(b"", text):
        depth = depth + 1 if bracket in b"[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            return f"nested deeper than {MAX_NESTING} levels of [ and {{"
    return None


def decode_kubeconfig(data: object, where: str) -> dict[str, Any]:
    """The kubeconfig in a Secret's ``data`` value (base64 of YAML), parsed but not checked.

    ``where`` (e.g. ``Secret ns/name key 'kubeconfig'``) starts every message.
    """
    refused = f"{where} is not a kubeconfig"
    if not isinstance(data, str) or not data:
        raise KubeconfigRefused(refused, "it is empty")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigRefused(refused, "not valid base64") from None
    problem = nesting_problem(raw)
    if problem:
        raise KubeconfigRefused(refused, problem)
    try:
        loaded = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise KubeconfigRefused(refused, yaml_problem(error)) from None
    except (ValueError, RecursionError):  # undecodable bytes; absurdly deep nesting
        raise KubeconfigRefused(refused, "not readable YAML text") from None
    if not isinstance(loaded, dict):
        raise KubeconfigRefused(refused, "not a mapping")
    return loaded
