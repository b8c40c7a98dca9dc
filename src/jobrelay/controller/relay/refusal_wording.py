"""What the user is told when an apiserver refuses an action of a plan. Pure.

The decision names, on each action that writes, the :class:`Terminal` its refusal
ends in (:class:`IfRefused`): its reason, and its message for each kind of
answer. The executor only sorts the answer into a :class:`RefusalAnswer` and fills in
the facts it has (the worker, the namespace, the refusal in words a tenant may
read), so that every word a user reads is chosen here, beside the decisions, and
not where the writes are made.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from jobrelay.vocabulary.outcome import Terminal

__all__ = [
    "DEPENDENCY_NOT_COPIED",
    "MIRROR_REJECTED",
    "MIRROR_UPDATE_REJECTED",
    "STATUS_REFUSED",
    "IfRefused",
    "RefusalAnswer",
]


class RefusalAnswer(enum.Enum):
    """What an apiserver answered a write, as far as the user's message depends on it."""

    # NotFound, and jobrelay may not create the namespace there (--create-namespaces off).
    NO_NAMESPACE = "no-namespace"
    # NotFound though the namespace is there: the kind itself is not served.
    NOT_SERVED = "not-served"
    UNREACHABLE = "unreachable"
    # Any other refusal: a policy, an invalid object, a quota.
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class IfRefused:
    """The Terminal a refusal ends in: ``reason``, and ``messages`` by answer (an answer
    not named there is said as :attr:`RefusalAnswer.REFUSED`).

    A message is a template over the facts the executor has: ``{cluster}``,
    ``{namespace}``, ``{kind}``, ``{api_version}``, ``{dependency}``, ``{refusal}``
    (the refusal in words a tenant may read: never a worker's own) and ``{answer}``
    (the apiserver's own words: only the manager's may be quoted).
    """

    reason: str
    messages: Mapping[RefusalAnswer, str]
    # Tried again after --rejected-retry (what refused it may change), else only once
    # the object changes (a refusal of our own making: a jobrelay bug).
    paced: bool = True
    # The apiserver's own words go to the controller's log (a worker's are never shown to
    # a tenant); a message that quotes them (``{answer}``) needs no copy there.
    answer_in_log: bool = True

    def terminal(
        self, answer: RefusalAnswer, facts: Mapping[str, str], *, retry_after: float, answered: str
    ) -> Terminal:
        """The Terminal for ``answer``; ``answered``: the apiserver's own words."""
        template = self.messages.get(answer, self.messages[RefusalAnswer.REFUSED])
        return Terminal(
            self.reason,
            template.format_map({**facts, "answer": answered}),
            retry_after=retry_after if self.paced else None,
            detail=answered if self.answer_in_log else "",
        )


MIRROR_REJECTED = IfRefused(
    "MirrorRejected",
    {
        RefusalAnswer.NO_NAMESPACE: "worker cluster {cluster} has no namespace {namespace} (and "
        "namespace creation is turned off): create it there",
        RefusalAnswer.NOT_SERVED: "worker cluster {cluster} answered NotFound to the mirror {kind} in "
        "namespace {namespace}, which exists: does it serve {api_version}?",
        RefusalAnswer.UNREACHABLE: "worker cluster {cluster} is unreachable",
        RefusalAnswer.REFUSED: "worker cluster {cluster} rejected the mirror {kind} ({refusal})",
    },
)

MIRROR_UPDATE_REJECTED = IfRefused(
    "MirrorUpdateRejected",
    {
        RefusalAnswer.REFUSED: "worker cluster {cluster} refused to apply this change to the mirror "
        "({refusal})"
    },
)

# The rules checker let through what the apiserver refuses: a bug of ours, shown to the
# user, and not retried until something changes.
STATUS_REFUSED = IfRefused(
    "StatusNotCopied",
    {
        RefusalAnswer.REFUSED: "the management apiserver refused the status jobrelay computed (a "
        "jobrelay bug, please report it): {answer}"
    },
    paced=False,
    answer_in_log=False,
)

DEPENDENCY_NOT_COPIED = IfRefused(
    "DependencyNotCopied",
    {
        RefusalAnswer.REFUSED: "worker cluster {cluster} refused the copy of {dependency} ({refusal})"
    },
)
