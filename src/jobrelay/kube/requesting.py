"""How one request to an apiserver travels, whatever it asks: the base of ApiClient.

Every request takes one of two paths: the direct path (aiohttp, with the
credential's fixed header; see :mod:`jobrelay.kube.transport`) when there is
one, else httpx2 with the credential's own flow. A 401 on the direct path is
tried once more through httpx2 (a token file may have been rotated), whose
fresh header the direct path then takes, for requests and watches alike.
Writes pass the write fence first; every request is recorded (counts, the
``on_request`` hook) and an outage is logged when it starts and when it ends.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import httpx2
import msgspec

from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import (
    EXEC_ERRORS,
    ApiError,
    WriteFenced,
    error_from_body,
    exec_failure,
    unreachable_error,
)
from jobrelay.kube.transport import DirectSender, StreamedResponse, read_capped
from jobrelay.vocabulary.collection_pause import collection_paused
from jobrelay.vocabulary.resource import Resource

__all__ = ["RequestRecord", "Requester", "WatchRestart"]

_log = logging.getLogger(__name__)

_json_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request, handed to the ``on_request`` hook (for metrics)."""

    cluster: str
    verb: str  # Kubernetes verb: get, list, watch, create, update, patch, delete
    resource: str  # plural, e.g. "jobs"
    code: int  # HTTP status; 0 when no response arrived
    seconds: float  # for watches: until the response headers, not the stream's end


@dataclass(frozen=True, slots=True)
class WatchRestart:
    """An informer of this client watching again after a failure, handed to the
    ``on_watch_restart`` hook (for metrics)."""

    cluster: str
    kind: str  # the resource's kind, as its Resource names it
    reason: str  # "relist" (starting over from a list) or "rewatch" (from its version)


class _Exchange:
    """One request as callers and metrics see it, whichever path it took: no answer and
    a failed exec credential plugin leave it as ApiErrors, and it is recorded with its
    HTTP status (``code``, 0 while there is none). A class, not a generator: every
    request passes through it."""

    __slots__ = ("_requester", "_resource", "_started", "_verb", "code")

    def __init__(self, requester: Requester, verb: str, resource: Resource) -> None:
        self._requester = requester
        self._verb = verb
        self._resource = resource
        self._started = time.monotonic()
        self.code = 0

    def __enter__(self) -> _Exchange:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if isinstance(exc, httpx2.HTTPError):
                raise self._requester._unreachable(exc) from exc
            if isinstance(
                exc, EXEC_ERRORS
            ):  # an exec credential plugin failed, or printed no token
                raise exec_failure(exc) from None
        finally:
            seconds = time.monotonic() - self._started
            self._requester._record(self._verb, self._resource, self.code, seconds)


class Requester:
    """Sends requests to one apiserver and records them; :class:`ApiClient` names them.

    Raises ApiError on any failure, including no answer (``code == 0``).
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        cluster: str = "default",
        options: ApiOptions | None = None,
        on_request: Callable[[RequestRecord], None] | None = None,
        direct: DirectSender | None = None,
    ) -> None:
        self.cluster = cluster
        self._http = http
        # Plain reads and writes skip httpx2 (see kube/transport.py); streams use it.
        self._direct = direct
        self._options = options or ApiOptions()
        # Called with every finished request (metrics); settable, like write_fence.
        self.on_request = on_request
        # Called by this client's informers when a watch starts again (metrics).
        self.on_watch_restart: Callable[[WatchRestart], None] | None = None
        self._counts: Counter[str] = Counter()
        # See ApiOptions.write_fence; settable, e.g. once start-up writes are done.
        self.write_fence = self._options.write_fence
        # Whether the last request got an answer: an outage is logged once when it
        # starts and once when it ends, not once per request that meets it.
        self._answering = True

    @property
    def server(self) -> str:
        """The apiserver's URL."""
        return str(self._http.base_url).rstrip("/")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def request_counts(self) -> Mapping[str, int]:
        """Requests sent so far, per Kubernetes verb (a snapshot)."""
        return dict(self._counts)

    @property
    def answering(self) -> bool:
        """Whether the last request to this apiserver got an answer (any HTTP status)."""
        return self._answering

    async def _call(
        self,
        verb: str,
        method: str,
        resource: Resource,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        fenced: bool = True,
    ) -> dict[str, Any]:
        """One request whose answer is a JSON object: fenced if a write, over either path."""
        if fenced and method != "GET" and self.write_fence is not None and not self.write_fence():
            raise WriteFenced(verb, resource.plural)
        content = None if body is None else _json_encoder.encode(body)
        headers = {"Content-Type": content_type} if content is not None else None
        with _Exchange(self, verb, resource) as answer:
            if self._direct is not None:
                answer.code, reply = await self._direct.send(
                    method,
                    path,
                    params=params,
                    content=content,
                    headers=headers,
                    timeout=self._options.request_timeout if timeout is None else timeout,
                    limit=self._options.max_body_bytes,
                )
            if self._direct is None or self._retries_with_flow(answer.code):
                extra: dict[str, Any] = (
                    {} if timeout is None else {"timeout": httpx2.Timeout(timeout)}
                )
                request = self._http.build_request(
                    method, path, params=params, content=content, headers=headers, **extra
                )
                response = await self._http.send(request, stream=True)
                try:
                    answer.code = response.status_code
                    reply = await read_capped(
                        response.aiter_bytes(), self._options.max_body_bytes, code=answer.code
                    )
                finally:
                    await response.aclose()
                self._refresh_direct(answer.code)
        code = answer.code
        if code >= 400:
            raise error_from_body(code, reply)
        try:
            # A list page is tens of thousands of objects at once: collected after, not
            # during (vocabulary/collection_pause.py), else a relist walks the cache anew
            # with every page.
            with collection_paused():
                decoded = msgspec.json.decode(reply)
        except msgspec.DecodeError as exc:
            raise ApiError(code, "InvalidResponse", f"undecodable body: {exc}") from exc
        if not isinstance(decoded, dict):
            raise ApiError(code, "InvalidResponse", "response body is not a JSON object")
        return decoded

    async def _open_stream(
        self, request: httpx2.Request, verb: str, resource: Resource, *, direct: bool = False
    ) -> StreamedResponse:
        """Send a streaming GET and record it; the open response when the server said 200
        (the caller reads and closes it), else ApiError with the response closed.

        ``direct``: over the direct path when there is one (its own headers).
        """
        with _Exchange(self, verb, resource) as answer:
            response: StreamedResponse | None = None
            if direct and self._direct is not None:
                response = await self._direct.open(request)
                if self._retries_with_flow(response.status_code):
                    await response.aclose()
                    response = None
            if response is None:
                response = await self._http.send(request, stream=True)
                if direct:
                    self._refresh_direct(response.status_code)
            answer.code = response.status_code
        if answer.code != 200:
            try:
                raise error_from_body(
                    answer.code,
                    await read_capped(
                        response.aiter_bytes(), self._options.max_body_bytes, code=answer.code
                    ),
                )
            except httpx2.HTTPError as exc:
                raise self._unreachable(exc) from exc
            finally:
                await response.aclose()
        return response

    def _retries_with_flow(self, code: int) -> bool:
        """Whether the direct path's answer ``code`` is tried again through httpx2: a 401
        to a credential httpx2's flow may renew (it reads a token file again)."""
        return code == 401 and self._direct is not None and self._direct.carries_credential

    def _refresh_direct(self, code: int) -> None:
        """After a request through httpx2's flow that was not refused, the direct path
        takes the credential's header again (a rotated token, say)."""
        if self._direct is not None and code != 401:
            self._direct.refresh(self._http.auth)

    # -- outages and metrics -------------------------------------------------

    def _unreachable(self, exc: httpx2.HTTPError) -> ApiError:
        error = unreachable_error(exc, self.server)
        if self._answering:
            self._answering = False
            _log.warning(
                "apiserver %s does not answer (%s): requests to it are retried with backoff",
                self.cluster,
                error.message,
                extra={"cluster": self.cluster},
            )
        return error

    def _record(self, verb: str, resource: Resource, code: int, seconds: float) -> None:
        self._counts[verb] += 1
        if code and not self._answering:
            self._answering = True
            _log.info("apiserver %s answers again", self.cluster, extra={"cluster": self.cluster})
        if self.on_request is None:
            return
        try:
            self.on_request(RequestRecord(self.cluster, verb, resource.plural, code, seconds))
        except Exception:
            # Metrics must never break a request.
            _log.exception("on_request hook failed")
