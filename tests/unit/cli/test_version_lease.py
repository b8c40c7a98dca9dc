"""`jobrelay version` reads what anyone allowed to update the Lease may write: bounded,
and printed safe for the terminal."""

from __future__ import annotations

from jobrelay.cli.version import Leader, server_line
from jobrelay.vocabulary.names import KINDS_ANNOTATION, VERSION_ANNOTATION


def lease(version: str, kinds: str, holder: str = "pod-a") -> dict[str, object]:
    return {
        "metadata": {
            "namespace": "ns", "name": "jobrelay-relay",
            "annotations": {VERSION_ANNOTATION: version, KINDS_ANNOTATION: kinds},
        },
        "spec": {"holderIdentity": holder},
    }  # fmt: skip


def test_what_the_leader_records_is_read() -> None:
    leader = Leader.of(lease("0.2.0", "Job.v1.batch,JobSet.v1alpha2.jobset.x-k8s.io"))
    assert leader.kinds == ("Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io")
    assert server_line(leader) == "Server Version: 0.2.0 (leader pod-a, Lease ns/jobrelay-relay)"


def test_a_forged_lease_is_bounded_and_shown_escaped() -> None:
    leader = Leader.of(lease("1\x1b[2J" + "9" * 100_000, ",".join(["K.v1.g"] * 100_000)))
    assert len(leader.version) <= 253 and len(leader.kinds) <= 64
    line = server_line(leader)
    assert "\x1b" not in line and len(line) < 1_000, line[:200]
