"""`jobrelay get` and `jobrelay version` warn, on stderr, when no controller holds a fresh
Lease (stale or absent); never when the user may not read Leases or the read fails; and
stdout stays exactly what it is with a leading controller (scripts parse it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import FakeApiserver
from tests.unit.cli.test_get import put_job

from jobrelay.cli import get as get_cli
from jobrelay.cli import version as version_cli
from jobrelay.cli.controller_lease import controller_lease_warning, lease_state_text
from jobrelay.cli.main import cli
from jobrelay.kube.election.election_rules import LeaseFreshness, LeaseState

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
REF = "jobrelay-system/jobrelay-relay"


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    monkeypatch.setattr(version_cli, "manager_client", lambda *_args: fake.client())
    put_job(fake, "waiting")
    return fake


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def stale(manager: FakeApiserver, minutes: int = 5) -> None:
    manager.lead("pod-a", renewed=datetime.now(UTC) - timedelta(minutes=minutes))


# -- the wording (pure) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("freshness", "expected"),
    [
        (None, None),
        (LeaseFreshness(LeaseState.FRESH, "pod-a", NOW), None),
        (LeaseFreshness(LeaseState.UNKNOWN), None),
        (LeaseFreshness(LeaseState.STALE, "pod-a", NOW - timedelta(minutes=5), 285.0),
         f"warning: no jobrelay controller holds a fresh lease ({REF} last renewed 5m ago by "
         "pod-a): workloads are not dispatched; is the controller running?"),
        (LeaseFreshness(LeaseState.STALE, "", NOW - timedelta(seconds=30), 30.0),
         f"warning: no jobrelay controller holds a fresh lease ({REF} released 30s ago by its "
         "last holder): workloads are not dispatched; is the controller running?"),
        (LeaseFreshness(LeaseState.STALE, "pod-a", None),
         f"warning: no jobrelay controller holds a fresh lease ({REF} held by pod-a, never "
         "renewed): workloads are not dispatched; is the controller running?"),
        (LeaseFreshness(LeaseState.ABSENT),
         f"warning: no jobrelay controller has run against this manager (no Lease {REF}): "
         "workloads are not dispatched; if it runs in another namespace or under another "
         "name, pass --controller-namespace and --controller-name (one run with "
         "--no-leader-elect writes no Lease)"),
    ],
)  # fmt: skip
def test_the_warning_line(freshness: LeaseFreshness | None, expected: str | None) -> None:
    assert controller_lease_warning(freshness, REF, NOW, "--controller-namespace") == expected


def test_a_forged_holder_is_bounded_and_escaped() -> None:
    forged = LeaseFreshness(LeaseState.STALE, "\x1b[2J" + "x" * 10_000, NOW, 100.0)
    line = controller_lease_warning(forged, REF, NOW, "--namespace") or ""
    assert "\x1b" not in line and len(line) < 1_000
    assert len(lease_state_text(forged, REF, NOW)) < 400


# -- jobrelay get ----------------------------------------------------------------------


@pytest.mark.parametrize("args", [(), ("-o", "wide"), ("-o", "name"), ("-o", "json"),
                                  ("-o", "yaml"), ("jobs", "waiting"), ("all",)])  # fmt: skip
def test_get_warns_once_on_a_stale_lease_and_stdout_is_unchanged(
    manager: FakeApiserver, args: tuple[str, ...]
) -> None:
    manager.lead()
    fresh = run("get", "-n", "team-a", *args)
    assert fresh.exit_code == 0, fresh.output
    assert fresh.stderr == ""
    stale(manager)
    result = run("get", "-n", "team-a", *args)
    assert result.exit_code == 0, result.output
    assert result.stdout == fresh.stdout
    assert result.stderr.splitlines() == [
        f"warning: no jobrelay controller holds a fresh lease ({REF} last renewed 5m ago "
        "by pod-a): workloads are not dispatched; is the controller running?"
    ]
    if args == ("-o", "json"):
        assert json.loads(result.stdout)["items"][0]["metadata"]["name"] == "waiting"


def test_get_finds_a_controller_in_another_namespace_by_its_lease(
    manager: FakeApiserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBRELAY_NAMESPACE", raising=False)
    manager.lead(namespace="ops")  # the controller runs elsewhere: found there
    result = run("get", "-n", "team-a")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    pointed = run("get", "-n", "team-a", "--controller-namespace", "ops")
    assert pointed.stderr == "" and pointed.stdout == result.stdout
    # Pointed elsewhere (the flag, or $JOBRELAY_NAMESPACE), it finds no Lease, and says which.
    for elsewhere in (("--controller-namespace", "jobrelay-system"), ()):
        if not elsewhere:
            monkeypatch.setenv("JOBRELAY_NAMESPACE", "jobrelay-system")
        missed = run("get", "-n", "team-a", *elsewhere)
        (line,) = missed.stderr.splitlines()
        assert line.startswith("warning: no jobrelay controller has run against this manager")
        assert "--controller-namespace" in line and "jobrelay-system/jobrelay-relay" in line


def test_get_names_the_namespace_option_when_no_lease_exists(manager: FakeApiserver) -> None:
    result = run("get", "-n", "team-a")
    assert result.exit_code == 0, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("warning: no jobrelay controller has run against this manager")
    assert "--controller-namespace" in line


def test_get_reads_the_lease_of_its_controller_name(manager: FakeApiserver) -> None:
    manager.lead(name="example-batch")
    result = run("get", "-n", "team-a", "--controller-name", "example.com/batch")
    assert "no jobrelay controller" not in result.stderr


@pytest.mark.parametrize("refusal", ["forbidden", "server error", "unreachable lease"])
def test_get_says_nothing_when_the_lease_cannot_be_read(
    manager: FakeApiserver, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    if refusal == "forbidden":
        manager.forbidden.add("leases")  # a tenant may not read Leases: not nagged
    else:

        async def failing(*_args: object, **_kwargs: object) -> None:
            if refusal == "server error":
                from jobrelay.kube.errors import ApiError

                raise ApiError(500, "InternalError", "etcd is slow")
            raise OSError("connection reset")

        real = get_cli.manager_client

        def client(*args: object) -> object:
            made = real(*args)
            original = made.get

            async def get(resource: object, *rest: object, **kwargs: object) -> object:
                if getattr(resource, "plural", "") == "leases":
                    return await failing()
                return await original(resource, *rest, **kwargs)

            made.get = get  # type: ignore[method-assign]
            return made

        monkeypatch.setattr(get_cli, "manager_client", client)
    result = run("get", "-n", "team-a")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert "waiting" in result.stdout


def test_get_watch_checks_once_at_start(
    manager: FakeApiserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale(manager)
    followed: list[str] = []

    async def follow(*_args: object) -> None:
        followed.append("watching")  # the watch itself is test_get_watch's

    monkeypatch.setattr(get_cli, "follow", follow)
    result = run("get", "-n", "team-a", "-w")
    assert result.exit_code == 0, result.output
    assert followed == ["watching"]
    assert result.stderr.count("no jobrelay controller holds a fresh lease") == 1
    lease_reads = [p for m, p, _, _ in manager.requests if "/leases/" in p and m == "GET"]
    assert len(lease_reads) == 1


# -- jobrelay version ------------------------------------------------------------------


def test_version_says_a_stale_lease_plainly(manager: FakeApiserver) -> None:
    manager.lead(annotations={"jobrelay.dev/version": "1.2.3"})
    fresh = run("version")
    assert fresh.exit_code == 0, fresh.output
    assert fresh.stdout.splitlines()[1] == f"Server Version: 1.2.3 (leader pod-a, Lease {REF})"
    assert fresh.stderr == ""
    manager.lead(annotations={"jobrelay.dev/version": "1.2.3"},
                 renewed=datetime.now(UTC) - timedelta(minutes=5))  # fmt: skip
    result = run("version")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        f"Server Version: 1.2.3 (stale: no controller leads now; {REF} last renewed 5m ago "
        "by pod-a)"
    )
    assert result.stderr.startswith("warning: no jobrelay controller holds a fresh lease")
    answer = json.loads(run("version", "-o", "json").stdout)
    assert answer["serverVersion"]["leaseState"] == "stale"
    assert answer["serverVersion"]["leader"] == "pod-a"


def test_version_says_when_no_controller_ever_ran(manager: FakeApiserver) -> None:
    result = run("version")
    assert result.exit_code == 1
    assert "no jobrelay controller has run against this manager" in result.stderr
    assert "--namespace and --controller-name" in result.stderr
