"""Recorded /metrics scrapes as promtool's ``input_series`` (pure: no I/O, no clock).

A recording is a list of rounds; each round holds one scrape's text per replica
(by instance). Rounds are laid out one scrape interval apart (promtool's
``interval``), every series labelled with its ``instance`` and ``job`` as
Prometheus labels a target's series, with ``up`` 1 for each scrape. A label with
an empty value is dropped, as Prometheus drops it (``worker=""`` is no ``worker``).
A series missing from a round has no sample there (``_``). After the last round
every series keeps its last value for ``hold`` more intervals: the recorded state
persisting, so that an alert with a ``for:`` clause can be judged on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["input_series", "samples_of", "series_name", "value_text"]

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


def samples_of(text: str, *, instance: str, job: str) -> Samples:
    """One scrape's samples, labelled as Prometheus stores them (with ``up``)."""
    target = (("instance", instance), ("job", job))
    found: Samples = {("up", target): 1.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if v != ""}
            labels.update(target)
            found[sample.name, tuple(sorted(labels.items()))] = float(sample.value)
    return found


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def series_name(name: str, labels: Labels) -> str:
    """``name{a="b",...}`` as promtool reads a series."""
    inner = ",".join(f'{key}="{_escaped(value)}"' for key, value in labels)
    return f"{name}{{{inner}}}"


def value_text(value: float) -> str:
    """A sample value in promtool's notation: positional (``1e+09`` would read as an
    expansion), ``NaN``, ``Inf``, ``-Inf``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def input_series(
    rounds: Sequence[Mapping[str, str]], *, hold: int, job: str = "jobrelay"
) -> list[dict[str, str]]:
    """promtool ``input_series`` from recorded rounds of scrapes (see the module doc)."""
    if not rounds:
        raise ValueError("no scrape recorded")
    per_round = [
        {
            key: value
            for instance, text in sorted(scrapes.items())
            for key, value in samples_of(text, instance=instance, job=job).items()
        }
        for scrapes in rounds
    ]
    keys = sorted({key for samples in per_round for key in samples})
    series = []
    for key in keys:
        values = [samples.get(key) for samples in per_round]
        tokens = ["_" if value is None else value_text(value) for value in values]
        last = values[-1]
        if last is not None and hold > 0:
            tokens[-1] = f"{value_text(last)}+0x{hold}"
        series.append({"series": series_name(*key), "values": " ".join(tokens)})
    return series
