"""What went wrong with a kubeconfig, said without quoting it: pure functions, no I/O.

YAML parse errors print the offending lines, lightkube's errors name values
they met (an exec plugin's stderr, an apiVersion), and msgspec's can too. A
kubeconfig's lines hold tokens and keys, and these messages end up in
WorkerCluster conditions, logs and CLI output, so each is reduced here to what
is wrong and where: a YAML position, a JSON path, a type.
"""

from __future__ import annotations

import binascii
import re
import ssl

import msgspec
import yaml

__all__ = ["library_problem", "yaml_problem"]

# Quoted spans in a YAML problem (an alias, a tag, a character): kept only when
# short, like ':' or '\t', since a longer one may be a piece of the document.
_QUOTED = re.compile(r"'[^']{3,}'|\"[^\"]{3,}\"|`[^`]{3,}`")
# msgspec's schema complaints name types and fields of lightkube's models, never values.
_MSGSPEC_SAFE = re.compile(
    r"^(?:Expected `[\w |\[\]]+`, got `\w+`|Object missing required field `[\w-]+`)"
)
_MSGSPEC_PATH = re.compile(r" - at `(\$[\w.\[\]-]{0,200})`$")
# lightkube's ConfigError texts worth keeping, each without its quoted value.
_LIGHTKUBE_KNOWN = (
    (re.compile(r"^Context .* not found"), "the context is not in the kubeconfig"),
    (re.compile(r"^auth-provider not supported"), "auth-provider is not supported"),
    (re.compile(r"is relative, but kubeconfig path unknown$"), "a relative file path"),
    (re.compile(r"^Configuration file .* not found"), "the file does not exist"),
    (re.compile(r"^auth exec api version .* not implemented"), "unsupported exec apiVersion"),
    (re.compile(r"^Token file .* not found"), "the tokenFile does not exist"),
)
_EXEC_FAILED = re.compile(r"^Exec .* returned (-?\d+):")


def yaml_problem(error: BaseException) -> str:
    """What is wrong with a YAML document and where (line, column), not its lines."""
    if not isinstance(error, yaml.MarkedYAMLError):
        return f"invalid YAML ({type(error).__name__})"
    mark = error.problem_mark or error.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = "; ".join(part for part in (error.context, error.problem) if part)
    what = _QUOTED.sub("'...'", what)[:200]
    return f"invalid YAML{where}: {what or 'cannot be parsed'}"


def library_problem(error: BaseException) -> str:
    """A one-line reason for an exception raised while a client was built from a
    kubeconfig (lightkube, msgspec, ssl, base64, YAML), never quoting the kubeconfig."""
    if isinstance(error, yaml.YAMLError):
        return yaml_problem(error)
    if isinstance(error, msgspec.ValidationError):
        text = str(error)
        found = _MSGSPEC_SAFE.match(text)
        path = _MSGSPEC_PATH.search(text)
        what = found.group(0) if found else "a field has the wrong shape"
        return what + (f" at {path.group(1)}" if path else "")
    if isinstance(error, ssl.SSLError):
        # reason is OpenSSL's code, e.g. PEM_LIB or NO_CERTIFICATE_OR_CRL_FOUND.
        return f"certificate or key data cannot be loaded ({error.reason or 'SSL error'})"
    if isinstance(error, binascii.Error):
        return "certificate or key data is not valid base64"
    if isinstance(error, OSError):
        # The file name is the admin's own path; the errno text says what happened.
        named = f" {error.filename}" if error.filename else ""
        return f"cannot read{named}: {error.strerror or type(error).__name__}"
    text = str(error)
    exec_failed = _EXEC_FAILED.match(text)
    if exec_failed:
        return (
            f"the exec credential plugin exited with code {exec_failed.group(1)} "
            "(its output is not shown: it may hold credentials)"
        )
    for pattern, said in _LIGHTKUBE_KNOWN:
        if pattern.search(text):
            return said
    return f"unusable ({type(error).__name__})"
