"""What a request to an apiserver can end in, as one exception type: :class:`ApiError`.

Callers branch on the apiserver's own ``reason``, as client-go's
``apierrors.IsXxx`` do; a request that never got an answer is an ApiError with
``code == 0`` too, so a caller has one thing to catch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx2
import msgspec
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from jobrelay.kube.redact import library_problem

__all__ = [
    "EXEC_ERRORS",
    "ApiError",
    "KubeconfigError",
    "ResponseTooLarge",
    "WriteFenced",
    "error_from_body",
    "exec_failure",
    "unreachable_error",
]


class KubeconfigError(ValueError):
    """A kubeconfig (file or Secret content) that cannot be turned into a client.

    Its message says what is wrong and where, never quoting the kubeconfig
    (see :mod:`jobrelay.kube.redact`); the library's exception is not chained.
    """


class ApiError(Exception):
    """A request the apiserver refused, or that never reached it (``code == 0``).

    ``reason`` and ``message`` come from the ``Status`` body when there is one,
    so callers branch on the apiserver's own reason, as client-go does.
    """

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = details or {}

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> ApiError:
        """The error a ``Status`` object describes, e.g. the object of a watch ERROR event."""
        code = status.get("code") or 0
        reason = status.get("reason") or _REASON_FROM_CODE.get(code, "Unknown")
        # A Status from a worker may hold anything: its message is read as text.
        message = status.get("message") or ""
        return cls(
            code, reason, message if isinstance(message, str) else str(message),
            status.get("details"),
        )  # fmt: skip

    @property
    def is_not_found(self) -> bool:
        return self.reason == "NotFound"

    @property
    def is_conflict(self) -> bool:
        # AlreadyExists is a 409 too, but means something else to a caller.
        return self.reason == "Conflict"

    @property
    def is_already_exists(self) -> bool:
        return self.reason == "AlreadyExists"

    @property
    def is_gone(self) -> bool:
        # 410 comes as "Expired" (too old resourceVersion, continue token) or "Gone".
        return self.code == 410 or self.reason in ("Expired", "Gone")

    @property
    def is_invalid(self) -> bool:
        return self.reason == "Invalid"

    @property
    def is_namespace_terminating(self) -> bool:
        """Refused because the namespace is being deleted (its NamespaceLifecycle cause):
        nothing can be created there any more, and nobody is left to read it."""
        causes = self.details.get("causes")
        if isinstance(causes, list) and any(
            isinstance(cause, Mapping) and cause.get("reason") == "NamespaceTerminating"
            for cause in causes
        ):
            return True
        return self.code == 403 and "because it is being terminated" in self.message

    @property
    def is_unreachable(self) -> bool:
        """No answer from the apiserver: connection refused, TLS failure, timeout."""
        return self.code == 0 and self.reason in ("Unreachable", "Timeout")


class WriteFenced(ApiError):
    """A write this process refused to send: it does not hold the leader lease (now)."""

    def __init__(self, verb: str, resource: str) -> None:
        super().__init__(
            0,
            "NotLeader",
            f"{verb} {resource} refused: this replica does not hold the leader lease",
        )


class ResponseTooLarge(ApiError):
    """An answer longer than this client reads (a body, or one line of a watch): an
    apiserver that sends without end must not take the controller's memory with it.
    Retried with backoff like any failed request."""

    def __init__(self, code: int, what: str, limit: int) -> None:
        super().__init__(
            code,
            "ResponseTooLarge",
            f"{what} is longer than {_size(limit)}: not read (an apiserver that sends "
            "without end, or a limit to raise in ApiOptions)",
        )


def _size(limit: int) -> str:
    mib = limit / (1024 * 1024)
    return f"{mib:g} MiB" if mib >= 1 else f"{limit} bytes"


# Like client-go's apierrors.IsXxx, callers test the reason; when a body carries
# none (e.g. a proxy answered), it is derived from the HTTP code.
_REASON_FROM_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class _Status(msgspec.Struct):
    kind: str = ""
    code: int = 0
    reason: str = ""
    message: str = ""
    details: dict[str, Any] | None = None


_status_decoder = msgspec.json.Decoder(_Status)


def error_from_body(code: int, body: bytes) -> ApiError:
    """The error an apiserver's answer ``code`` with ``body`` (a Status, or anything) says."""
    fallback_reason = _REASON_FROM_CODE.get(code, "Unknown")
    try:
        status = _status_decoder.decode(body)
    except msgspec.DecodeError:
        text = body[:500].decode("utf-8", "replace").strip()
        return ApiError(code, fallback_reason, text or f"HTTP {code}")
    if status.kind != "Status":
        return ApiError(code, fallback_reason, f"HTTP {code}")
    return ApiError(
        status.code or code, status.reason or fallback_reason, status.message, status.details
    )


def unreachable_error(exc: httpx2.HTTPError, server: str = "") -> ApiError:
    """A request that got no answer (refused, reset, timed out), with the root cause."""
    reason = "Timeout" if isinstance(exc, httpx2.TimeoutException) else "Unreachable"
    message = f"{type(exc).__name__}: {exc}"
    # httpx says "All connection attempts failed"; the OSError at the end of the
    # chain says why and where ("[Errno 111] Connect call failed ('127.0.0.1', 6443)").
    cause: BaseException | None = exc
    root: OSError | None = None
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno is not None:
            root = cause
        cause = cause.__cause__ or cause.__context__
    if root is not None and str(root) not in message:
        message += f" ({type(root).__name__}: {root})"
    # Where and why in a few words, for a one-line CLI error ("connection refused").
    details: dict[str, Any] = {"cause": _short_cause(exc, root)}
    if server:
        details["server"] = server
    return ApiError(0, reason, message, details)


def _short_cause(exc: httpx2.HTTPError, root: OSError | None) -> str:
    if isinstance(exc, httpx2.TimeoutException):
        return "timed out"
    if root is not None and root.errno is not None:
        return os.strerror(root.errno).lower()
    said = str(exc)
    return said if 0 < len(said) <= 80 else type(exc).__name__


# What an exec credential plugin's run may raise: its failure, or output that is
# no ExecCredential (lightkube reads output["status"]["token"] from its JSON).
EXEC_ERRORS = (LightkubeConfigError, ValueError, KeyError, TypeError)


def exec_failure(exc: BaseException) -> ApiError:
    """One of :data:`EXEC_ERRORS` as the caller sees it: not authenticated, and why."""
    if isinstance(exc, LightkubeConfigError):
        problem = f"exec credential plugin: {library_problem(exc)}"
    else:
        problem = "exec credential plugin: its output is not an ExecCredential with status.token"
    return ApiError(0, "Unauthorized", problem)
