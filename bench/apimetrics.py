"""Reading an apiserver's own ``/metrics``: ``apiserver_request_total`` by verb and resource.

``ApiClient`` only speaks the resource API, so this builds its own small
httpx2 client from a kubeconfig (server, CA, client certificate or bearer
token; files or inline ``*-data``). The local fleet's admin kubeconfigs are
``system:masters``, which may GET ``/metrics``.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import ssl
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml

# Verbs as apiserver_request_total spells them: HTTP methods, plus LIST/WATCH/APPLY.
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
# Our ApiClient's verbs (RequestRecord.verb) in the metric's spelling.
CLIENT_VERB = {"create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}

_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, order=True, slots=True)
class RequestKey:
    """One series of ``apiserver_request_total`` (minus labels that never matter here)."""

    verb: str
    group: str
    resource: str
    subresource: str
    code: str
    # A dry run (jobrelay's Pod Security probe): admission judged it, nothing was stored.
    dry_run: bool = False

    @property
    def target(self) -> str:
        """``jobs``, ``jobs/status``, ``events`` ..."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS and not self.dry_run

    @property
    def failed(self) -> bool:
        return not self.code.startswith("2")


RequestCounts = Counter[RequestKey]


def parse_request_totals(text: str) -> RequestCounts:
    """The ``apiserver_request_total`` samples of a Prometheus text exposition."""
    counts: RequestCounts = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        key = RequestKey(
            verb=labels.get("verb", ""),
            group=labels.get("group", ""),
            resource=labels.get("resource", ""),
            subresource=labels.get("subresource", ""),
            code=labels.get("code", ""),
            dry_run=bool(labels.get("dry_run")),
        )
        counts[key] += int(float(match["value"]))
    return counts


_DURATION = re.compile(
    r"^apiserver_request_duration_seconds_(?P<part>sum|count)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)"
)


@dataclass(frozen=True, slots=True)
class Scrape:
    """What one scrape of ``/metrics`` tells the bench."""

    requests: RequestCounts
    # Server-side time spent on write requests (all resources): seconds, count.
    write_seconds: float
    writes_timed: int


def parse_scrape(text: str) -> Scrape:
    seconds = 0.0
    timed = 0
    for line in text.splitlines():
        if not line.startswith("apiserver_request_duration_seconds_"):
            continue
        match = _DURATION.match(line)
        if match is None:
            continue
        if dict(_LABEL.findall(match["labels"])).get("verb") not in WRITE_VERBS:
            continue
        if match["part"] == "sum":
            seconds += float(match["value"])
        else:
            timed += int(float(match["value"]))
    return Scrape(parse_request_totals(text), seconds, timed)


def difference(after: RequestCounts, before: RequestCounts) -> RequestCounts:
    """What happened between two scrapes (series that did not grow are left out)."""
    delta: RequestCounts = Counter()
    for key, value in after.items():
        grown = value - before.get(key, 0)
        if grown > 0:
            delta[key] = grown
    return delta


class MetricsClient:
    """GETs ``/metrics`` (and other raw paths) from one apiserver."""

    def __init__(self, http: httpx2.AsyncClient, cluster: str) -> None:
        self._http = http
        self.cluster = cluster

    @classmethod
    def from_kubeconfig(cls, path: Path, cluster: str) -> MetricsClient:
        config = yaml.safe_load(path.read_text())
        context = _named(config, "contexts", config.get("current-context"))["context"]
        server = _named(config, "clusters", context["cluster"])["cluster"]
        user = _named(config, "users", context["user"])["user"]
        base = path.parent
        headers = {"Accept": "text/plain"}
        if user.get("token"):
            headers["Authorization"] = f"Bearer {user['token']}"
        http = httpx2.AsyncClient(
            base_url=server["server"],
            verify=_ssl_context(server, user, base),
            headers=headers,
            timeout=httpx2.Timeout(30.0, connect=5.0),
            trust_env=False,  # 127.0.0.1 only: never through a proxy
        )
        return cls(http, cluster)

    async def get_text(self, path: str) -> str:
        response = await self._http.get(path)
        response.raise_for_status()
        return response.text

    async def scrape(self) -> Scrape:
        return parse_scrape(await self.get_text("/metrics"))

    async def version(self) -> str:
        response = await self._http.get("/version", headers={"Accept": "application/json"})
        response.raise_for_status()
        return str(response.json().get("gitVersion", "unknown"))

    async def aclose(self) -> None:
        await self._http.aclose()


def _named(config: Mapping[str, Any], section: str, name: str | None) -> Mapping[str, Any]:
    entries = config.get(section) or []
    for entry in entries:
        if name is None or entry.get("name") == name:
            found: Mapping[str, Any] = entry
            return found
    raise ValueError(f"kubeconfig has no {section} entry named {name!r}")


def _ssl_context(server: Mapping[str, Any], user: Mapping[str, Any], base: Path) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if server.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif server.get("certificate-authority-data"):
        context.load_verify_locations(
            cadata=base64.b64decode(server["certificate-authority-data"]).decode()
        )
    elif server.get("certificate-authority"):
        context.load_verify_locations(cafile=base / server["certificate-authority"])
    with _cert_files(user, base) as files:
        if files is not None:
            context.load_cert_chain(*files)
    return context


@contextlib.contextmanager
def _cert_files(user: Mapping[str, Any], base: Path) -> Iterator[tuple[Path, Path] | None]:
    """The client certificate and key as files (inline data goes to private temp files)."""
    if user.get("client-certificate") and user.get("client-key"):
        yield base / user["client-certificate"], base / user["client-key"]
        return
    if not (user.get("client-certificate-data") and user.get("client-key-data")):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="bench-cert-") as directory:
        paths = []
        for field in ("client-certificate-data", "client-key-data"):
            target = Path(directory) / field
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(base64.b64decode(user[field]))
            paths.append(target)
        yield paths[0], paths[1]
