"""Which RelayQueue a workload belongs to.

A namespace's queues are those whose ``namespaceSelector`` selects it. Its *own* queues
are those among them that select namespaces by label (a team's queue); a catch-all
queue (empty selector: every namespace) is a namespace's queue only when no own queue
selects it, so it can never be used to leave a team queue's ceiling.

The label ``jobrelay.dev/queue`` chooses among the namespace's queues: one of its own
when it has any, else a catch-all. Without the label, the first by name of its own
queues, else of the catch-alls (so the answer never depends on the order queues were
read); none: the workload is not queued and is placed as before queues existed. A name
that is no queue, or a queue that may not take the namespace, holds the workload with a
Warning saying what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from jobrelay.admission.queue_model import LabelSelector, QueueHold, QueueSpec
from jobrelay.vocabulary.names import QUEUE_LABEL

__all__ = [
    "QUEUE_NOT_ALLOWED",
    "QUEUE_NOT_FOUND",
    "QueueChoice",
    "QueueIndex",
    "QueueNotAllowed",
    "QueueNotFound",
    "Queued",
    "Unqueued",
    "own_queues",
    "queue_for",
    "queue_name",
    "refusal",
]

QUEUE_NOT_FOUND: Final = "QueueNotFound"
QUEUE_NOT_ALLOWED: Final = "QueueNotAllowed"


@dataclass(frozen=True, slots=True)
class Queued:
    """The workload waits in the RelayQueue named ``queue``."""

    queue: str


@dataclass(frozen=True, slots=True)
class QueueNotFound:
    """The label names a queue that does not exist: held until it does."""

    name: str

    reason: ClassVar[str] = QUEUE_NOT_FOUND

    @property
    def message(self) -> str:
        return (
            f"no RelayQueue named {self.name!r}: create it (kubectl get relayqueues lists "
            f"them) or change the label {QUEUE_LABEL} to an existing queue"
        )


@dataclass(frozen=True, slots=True)
class QueueNotAllowed:
    """The label names a queue whose namespaceSelector does not take the namespace."""

    name: str
    namespace: str
    # When the queue is a catch-all and the namespace has queues of its own: those.
    own: tuple[str, ...] = ()

    reason: ClassVar[str] = QUEUE_NOT_ALLOWED

    @property
    def message(self) -> str:
        if self.own:
            listed = ", ".join(self.own[:5]) + (" ..." if len(self.own) > 5 else "")
            return (
                f"RelayQueue {self.name} is a catch-all (it selects every namespace) and "
                f"takes only namespaces no other queue selects; namespace {self.namespace} "
                f"has its own: {listed}: name one of those in the label {QUEUE_LABEL}, or "
                f"remove the label"
            )
        return (
            f"RelayQueue {self.name} does not admit namespace {self.namespace} (its "
            f"namespaceSelector does not match the namespace's labels): name another queue "
            f"in the label {QUEUE_LABEL}, or ask an admin to admit the namespace"
        )


@dataclass(frozen=True, slots=True)
class Unqueued:
    """No queue takes the workload: it is placed as without queues."""


QueueChoice = Queued | QueueNotFound | QueueNotAllowed | Unqueued


@dataclass(frozen=True, slots=True)
class QueueIndex:
    """The queues sorted out for a namespace's choice: those that select namespaces by
    label, by name, and the first catch-all by name. A pass makes it once for all its
    namespaces (1,000 namespaces and 1,000 queues are then not a million looks)."""

    by_label: tuple[tuple[str, LabelSelector], ...]
    first_catch_all: str | None

    @classmethod
    def of(cls, queues: Mapping[str, QueueSpec]) -> QueueIndex:
        return cls(
            tuple(
                sorted(
                    (
                        (name, queue.namespace_selector)
                        for name, queue in queues.items()
                        if not queue.namespace_selector.selects_all
                    ),
                    key=lambda pair: pair[0],
                )
            ),
            min(
                (name for name, queue in queues.items() if queue.namespace_selector.selects_all),
                default=None,
            ),
        )

    def own(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        """The queues that select a namespace labelled ``labels`` by label, by name."""
        return tuple(name for name, selector in self.by_label if selector.matches(labels))


def queue_for(
    named: str | None,
    namespace: str,
    namespace_labels: Mapping[str, str],
    queues: Mapping[str, QueueSpec],
    *,
    own: tuple[str, ...] | None = None,
    index: QueueIndex | None = None,
) -> QueueChoice:
    """The queue of a workload whose ``jobrelay.dev/queue`` label is ``named`` (None or
    empty: no label) in ``namespace`` (labelled ``namespace_labels``): see the module doc.
    ``own``: the namespace's own queues, and ``index``: the :class:`QueueIndex` of
    ``queues``, when the caller has them already."""
    if named:
        queue = queues.get(named)
        if queue is None:
            return QueueNotFound(named)
        if not queue.namespace_selector.matches(namespace_labels):
            return QueueNotAllowed(named, namespace)
        if queue.namespace_selector.selects_all:
            if own is None:
                own = (index or QueueIndex.of(queues)).own(namespace_labels)
            if own:
                return QueueNotAllowed(named, namespace, own)
        return Queued(named)
    index = index or QueueIndex.of(queues)
    own = index.own(namespace_labels) if own is None else own
    if own:
        return Queued(own[0])
    return Queued(index.first_catch_all) if index.first_catch_all is not None else Unqueued()


def own_queues(labels: Mapping[str, str], queues: Mapping[str, QueueSpec]) -> tuple[str, ...]:
    """The queues that select the namespace by its labels (not catch-alls), by name."""
    return QueueIndex.of(queues).own(labels)


def queue_name(
    named: str | None,
    namespace: str,
    namespace_labels: Mapping[str, str],
    queues: Mapping[str, QueueSpec],
) -> str:
    """The RelayQueue the workload waits in, as `jobrelay get` and the panel show it: ""
    for none (not queued, or its label names a queue that does not exist or does not
    admit the namespace: held with QueueNotFound or QueueNotAllowed, in no queue)."""
    choice = queue_for(named, namespace, namespace_labels, queues)
    return choice.queue if isinstance(choice, Queued) else ""


def refusal(choice: QueueChoice) -> QueueHold | None:
    """A queue that does not exist, or does not take the workload's namespace: held."""
    if isinstance(choice, QueueNotFound | QueueNotAllowed):
        return QueueHold(choice.reason, choice.message)
    return None
